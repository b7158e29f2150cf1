package models

import (
	"time"
)

// ShortTxBackoff makes InTx's waits short for a test; call the function it
// returns to restore them.
func ShortTxBackoff() func() {
	prev := txBackoff
	txBackoff = time.Millisecond
	return func() { txBackoff = prev }
}

// ConnectAttempts is how many times RetryConnector tries a connection.
const ConnectAttempts = connectAttempts
