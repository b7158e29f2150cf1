//go:build !record

package worker_test

import "testing"

// The recorders run each workflow on a real Temporal server through the
// API's test harness (api/apitest), which the replay tests do not need: they
// are built only with -tags record, so that the worker's test binary links
// no Temporal server. Record anew with
//
//	go test -tags record ./worker -run Replay -update
func recordOff(t *testing.T) {
	t.Helper()
	t.Fatal("-update records histories anew on a real Temporal server: run it with -tags record")
}

func record(t *testing.T)                  { recordOff(t) }
func recordDeviceSyncs(t *testing.T)       { recordOff(t) }
func recordEnroll(t *testing.T)            { recordOff(t) }
func recordGroupRecomputes(t *testing.T)   { recordOff(t) }
func recordManagement(t *testing.T)        { recordOff(t) }
func recordManagementResolve(t *testing.T) { recordOff(t) }
func recordNotificationRuns(t *testing.T)  { recordOff(t) }
func recordAudit(t *testing.T)             { recordOff(t) }
func recordHooks(t *testing.T)             { recordOff(t) }
