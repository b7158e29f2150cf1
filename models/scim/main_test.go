package scim_test

import (
	"testing"

	"iam/models/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
