// Package protection is the protection area: condition configs,
// conditional access policies and their assignments, device groups and the
// administrator settings. models/decide applies what it stores.
package protection
