// Package management is the management actions area: view columns,
// uploads and their resolving jobs, and executions that move or delete
// users in chunks.
package management
