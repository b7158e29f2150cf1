// Package enrollment is the enrollment area: factor configs, the users'
// enrollment data written by chunked upload jobs, smart-card CA configs
// (with the one certificate parser) and the logon script.
package enrollment
