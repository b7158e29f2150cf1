package sqldb

import (
	"iam/models"
	"time"
)

// ShortTxBackoff makes InTx's waits short for a test; call the function it
// returns to restore them.
func ShortTxBackoff() func() {
	prev := models.TxBackoff
	models.TxBackoff = time.Millisecond
	return func() { models.TxBackoff = prev }
}

// ConnectAttempts is how many times RetryConnector tries a connection.
const ConnectAttempts = models.ConnectAttempts
