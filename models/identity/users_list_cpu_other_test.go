//go:build !unix

package identity_test

import "time"

// processCPU is not measured here; the cpu-µs/op metric reads 0.
func processCPU() time.Duration { return 0 }
