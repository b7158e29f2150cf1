package enrollment_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/sqldb"
	"iam/models/store"
)

// caPair is a generated certificate authority and its key.
type caPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func generateCA(t *testing.T, cn string, notBefore, notAfter time.Time) caPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return caPair{cert: cert, key: key}
}

// issue signs a user certificate naming email.
func (ca caPair) issue(t *testing.T, email string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: email},
		EmailAddresses: []string{email}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestCAStore_ValidityWindow: a CA certificate that is not valid yet is
// refused at upload, saying when it becomes valid; and a CA is used to
// verify smart-card certificates only within its validity, so that one
// stored before that rule (or that expired since) verifies nothing outside
// it, rather than letting certificates through unchecked.
func TestCAStore_ValidityWindow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := store.NewStore(db)
		org := &identity.Organization{Name: "Org"}
		if err := store.Orgs.Create(ctx, org); err != nil {
			t.Fatal(err)
		}
		configs, err := store.Factors.List(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		var smart int64
		for _, c := range configs {
			if c.Type == enrollment.FactorSmartCard {
				smart = c.ID
			}
		}
		email := "email"
		now := time.Now()
		from := now.Add(48 * time.Hour)
		future := generateCA(t, "Future CA", from, now.Add(365*24*time.Hour))

		// Upload: refused, naming the date it becomes valid.
		_, err = store.CAs.Create(ctx, org.ID, smart, enrollment.CAInput{File: future.cert.Raw, MappingAttribute: &email})
		if models.ErrorCode(err) != models.EINVALID || !strings.Contains(err.Error(), "not valid yet") ||
			!strings.Contains(err.Error(), future.cert.NotBefore.UTC().Format(time.RFC3339)) {
			t.Fatalf("create a CA not valid yet: %v", err)
		}
		current := generateCA(t, "Current CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
		ca, err := store.CAs.Create(ctx, org.ID, smart, enrollment.CAInput{File: current.cert.Raw, MappingAttribute: &email})
		if err != nil {
			t.Fatal(err)
		}
		if _, err = store.CAs.Update(ctx, org.ID, smart, ca.ID, enrollment.CAInput{File: future.cert.Raw}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("replace the file with a CA not valid yet: %v", err)
		}

		// Verification: only within the CA's validity.
		trust, err := store.CAs.Trust(ctx, org.ID, []int64{smart})
		if err != nil {
			t.Fatal(err)
		}
		u := &identity.User{Email: "user@example.com"}
		cert := current.issue(t, u.Email)
		if err = trust[smart].Check(cert, u, now); err != nil {
			t.Errorf("within the CA's validity: %v", err)
		}
		for name, at := range map[string]time.Time{
			"before NotBefore": current.cert.NotBefore.Add(-time.Second),
			"after NotAfter":   current.cert.NotAfter.Add(time.Second),
		} {
			if err = trust[smart].Check(cert, u, at); err == nil || !strings.Contains(err.Error(), "valid only from") {
				t.Errorf("%s: %v, want the CA refused", name, err)
			}
		}

		// A CA not valid yet that an earlier version stored verifies nothing
		// (and its config does not fall back to accepting every certificate).
		if err = store.CAs.Delete(ctx, org.ID, smart, ca.ID); err != nil {
			t.Fatal(err)
		}
		stored := &enrollment.CAConfig{ID: sqldb.NewID(), OrgID: org.ID, FactorConfigID: smart, IsEnabled: true, CertDER: future.cert.Raw,
			SubjectName: future.cert.Subject.String(), Thumbprint: "F00D", MappingAttribute: email,
			ExpiresOn: future.cert.NotAfter, AddedTime: now, UpdatedAt: now}
		if _, err = db.NewInsert().Model(stored).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if trust, err = store.CAs.Trust(ctx, org.ID, []int64{smart}); err != nil {
			t.Fatal(err)
		}
		if err := trust[smart].Check(future.issue(t, u.Email), u, now); err == nil || !strings.Contains(err.Error(), "valid only from") {
			t.Errorf("a stored CA not valid yet: %v, want refused", err)
		}
		if err := trust[smart].Check(future.issue(t, u.Email), u, from.Add(time.Minute)); err != nil {
			t.Errorf("once valid: %v", err)
		}
	})
}
