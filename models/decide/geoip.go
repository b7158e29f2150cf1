package decide

import (
	"fmt"
	"net/netip"

	"github.com/oschwald/maxminddb-golang/v2"
)

// GeoIP locates addresses with a MaxMind-format database (GeoLite2 or
// GeoIP2 Country or City, or any database whose records carry
// country.iso_code, or registered_country.iso_code as a fallback).
type GeoIP struct {
	db   *maxminddb.Reader
	path string
}

// OpenGeoIP opens the database at path.
func OpenGeoIP(path string) (*GeoIP, error) {
	db, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open GeoIP database %s: %w", path, err)
	}
	return &GeoIP{db: db, path: path}, nil
}

// Close releases the database.
func (g *GeoIP) Close() error { return g.db.Close() }

type geoRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	RegisteredCountry struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"registered_country"`
}

// Country implements Locator.
func (g *GeoIP) Country(addr netip.Addr) (string, string) {
	res := g.db.Lookup(addr.Unmap())
	if !res.Found() {
		return "", "not in the GeoIP database"
	}
	var rec geoRecord
	if err := res.Decode(&rec); err != nil {
		return "", "the GeoIP record does not read: " + err.Error()
	}
	switch {
	case rec.Country.ISOCode != "":
		return rec.Country.ISOCode, ""
	case rec.RegisteredCountry.ISOCode != "":
		return rec.RegisteredCountry.ISOCode, ""
	}
	return "", "the GeoIP record names no country"
}
