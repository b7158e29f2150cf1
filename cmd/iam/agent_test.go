package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/devices"
)

// `iam agent simulate` plays its agents against a running API and prints
// their figures.
func TestAgentSimulate(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	key, err := env.Store.Devices.InstallKey(context.Background(), env.Org.ID, devices.AgentDevice)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = run(t.Context(), []string{"agent", "simulate", "--url", env.URL, "--key", key, "--devices", "4", "--accounts", "2",
		"--interval", "20ms", "--rounds", "2"}, nil, &out, &errOut)
	if err != nil {
		t.Fatalf("simulate: %v %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "devices 4 registered; check-ins 8 ") || !strings.Contains(out.String(), "errors 0") {
		t.Errorf("output %q", out.String())
	}
	err = run(t.Context(), []string{"agent", "simulate", "--url", env.URL, "--key", "wrong", "--rounds", "1"}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong key: %v", err)
	}
}
