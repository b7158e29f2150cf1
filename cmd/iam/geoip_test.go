package main

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// writeGeoDB writes a tiny MaxMind database: 81.0.0.0/8 is FR.
func writeGeoDB(t *testing.T) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-Country", RecordSize: 24})
	if err != nil {
		t.Fatal(err)
	}
	_, n, _ := net.ParseCIDR("81.0.0.0/8")
	if err = tree.Insert(n, mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("FR")}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "geo.mmdb")
	f, err := os.Create(path) //nolint:gosec // a file in the test's temporary directory
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGeoIP_FromEnvironment: IAM_GEOIP_DB names the database decisions
// locate addresses with; unset, there is none; a path that does not open
// as a MaxMind database stops the start (runAPI returns the error before
// serving).
func TestGeoIP_FromEnvironment(t *testing.T) {
	path := writeGeoDB(t)
	cfg, err := loadConfig([]string{"IAM_GEOIP_DB=" + path})
	if err != nil {
		t.Fatal(err)
	}
	g, err := openGeoIP(cfg.GeoIPDB)
	if err != nil || g == nil {
		t.Fatalf("open %s: %v, %v", path, g, err)
	}
	defer closeT(t, g)
	if cc, why := g.Country(netip.MustParseAddr("81.2.3.4")); cc != "FR" {
		t.Errorf("81.2.3.4 located in %q (%s), want FR", cc, why)
	}
	if cc, _ := g.Country(netip.MustParseAddr("8.8.8.8")); cc != "" {
		t.Errorf("8.8.8.8 located in %q, want unknown", cc)
	}

	cfg, err = loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := openGeoIP(cfg.GeoIPDB); g != nil || err != nil {
		t.Errorf("no IAM_GEOIP_DB: %v, %v; want no database and no error", g, err)
	}

	notADB := filepath.Join(t.TempDir(), "not.mmdb")
	if err := os.WriteFile(notADB, []byte("not a MaxMind database"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "missing.mmdb"), notADB} {
		cfg, err := loadConfig([]string{"IAM_GEOIP_DB=" + bad})
		if err != nil {
			t.Fatal(err)
		}
		if g, err := openGeoIP(cfg.GeoIPDB); g != nil || err == nil || !strings.Contains(err.Error(), "IAM_GEOIP_DB") {
			t.Errorf("IAM_GEOIP_DB=%s: %v, %v; want an error naming the variable", bad, g, err)
		}
		// The API does not start: runAPI fails before it reads anything else.
		if err := runAPI(t.Context(), cfg, "127.0.0.1:0", nil, nil, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "IAM_GEOIP_DB") {
			t.Errorf("runAPI with IAM_GEOIP_DB=%s: %v, want the start stopped", bad, err)
		}
	}
}
