// Package devserver runs a complete Temporal server and its Web UI inside the
// current process, persisted in a single SQLite file. It backs `iam dev`, the
// one-process embedded default of the service; production uses a real
// Temporal cluster instead.
//
// # What runs
//
// Start launches the four Temporal services (frontend, history, matching and
// the internal system worker) in-process, wired together with static
// membership (no gossip ring), and the Temporal Web UI
// (github.com/temporalio/ui-server) pointing at the embedded frontend.
//
// State lives in DataDir/temporal.db (SQLite, WAL journal). The schema is
// created in one transaction when the file is new; the namespace is created
// only when missing; custom search attributes are registered only when
// missing. Stopping and starting again on the same DataDir therefore finds
// the namespace, its search attributes and every workflow, and unfinished
// workflows carry on as soon as a worker polls again.
//
// # Ports
//
//   - IP:FrontendPort - Temporal frontend gRPC, what SDK clients and workers
//     dial (FrontendAddress). 7233 in DefaultConfig; 0 picks a free port.
//   - IP:UIPort - Web UI and its HTTP API under /api/v1 (UIAddress, UIURL).
//     8233 in DefaultConfig; 0 picks a free port; DisableUI turns it off.
//   - history, matching and system-worker gRPC ports are always picked free on
//     the loopback interface, so several dev servers (parallel tests) never
//     clash. Metrics, pprof, the frontend HTTP API and the membership ring are
//     not started.
//
// The server is sized for one developer: one history shard, one task-queue
// partition and small caches.
package devserver
