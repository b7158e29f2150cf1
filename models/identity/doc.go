// Package identity is the identity area: organizations, users (their
// validation, listing and generated column code, users_gen.go), static and
// dynamic groups, passwords and sign-ins. Areas above it act on a user's
// deletion through UserStore.BeforeDelete.
package identity
