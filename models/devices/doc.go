// Package devices is the devices area: devices with an agent, their
// installation keys, check-ins and commands, local accounts and their links
// to users, and the account-linking sync job.
package devices
