package workflows

import (
	"testing"

	"go.temporal.io/sdk/converter"
)

func converterFor(t *testing.T) converter.DataConverter {
	t.Helper()
	return converter.GetDefaultDataConverter()
}
