package sqldb

import (
	"database/sql/driver"
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

// TxAttempts is how many times InTx runs a transaction at most.
const TxAttempts = txAttempts

// RetryConnector exposes the connector of Open to the tests.
func RetryConnector(c driver.Connector) driver.Connector { return retryConnector{c} }
