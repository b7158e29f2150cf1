// Package notification is the notifications area: templates and their
// files, notification schedules, runs and the delivery ledger.
package notification
