package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // G505: a certificate's thumbprint is its SHA-1 by definition
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/store"
)

// newCert makes a self-signed certificate for cn valid until notAfter and
// returns its DER bytes.
func newCert(t *testing.T, cn string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

type zipFile struct {
	name string
	data []byte
}

func zipOf(t *testing.T, files ...zipFile) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, f := range files {
		fw, err := w.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A ZIP of certificates enrolls smart cards by file name; hostile and
// broken entries fail their row only.
func TestEnrollment_SmartCards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		users := seedUsers(t, db, env.Org, 5)
		tok := env.Token(env.Org, "svc.quick_enrollment.ALL")
		future := time.Now().Add(365 * 24 * time.Hour).UTC().Truncate(time.Second)
		good := newCert(t, "User One", future)
		pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: newCert(t, "User Two", future)})
		b64 := []byte(base64.StdEncoding.EncodeToString(newCert(t, "User Three", future)))
		inner := zipOf(t, zipFile{"x.cer", good})
		archive := zipOf(t,
			zipFile{"certs/user1@example.com.cer", good},                                    // 1: DER
			zipFile{"User2@Example.com.pem", pemCert},                                       // 2: PEM, email case ignored
			zipFile{"user3@example.com.crt", b64},                                           // 3: base64 DER
			zipFile{"../user4@example.com.cer", good},                                       // 4: path traversal
			zipFile{"user4@example.com.zip", inner},                                         // 5: nested archive
			zipFile{"notes.txt", []byte("hello")},                                           // 6: not a certificate file
			zipFile{"user5@example.com.der", []byte("garbage")},                             // 7: not a certificate
			zipFile{"nobody@example.com.cer", good},                                         // 8: unknown user
			zipFile{"user4@example.com.cer", newCert(t, "Old", time.Now().Add(-time.Hour))}, // 9: expired
			zipFile{"__MACOSX/._user1@example.com.cer", []byte("junk")},                     // left out
		)
		resp := upload(t, env, "/api/v1/protection/quick-enrollment/upload-smartcards", tok,
			[][2]string{{"certificate_filename_pattern", "Primary Email"}}, "cards.zip", archive)
		if resp.Status != http.StatusAccepted {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		var acc acceptedBody
		resp.JSON(t, &acc)
		id, _ := models.ParseID("id", acc.Data.ID)
		job := env.WaitJob(env.Org, id, time.Minute, finished)
		if job.Status != jobs.JobWarning || job.Total != 9 || job.SuccessCount != 3 || job.ErrorCount != 6 {
			t.Fatalf("job %s %d/%d ok %d failed %d", job.Status, job.Processed, job.Total, job.SuccessCount, job.ErrorCount)
		}
		want := []string{"", "", "", "path traversal", "nested archives", "not a certificate file", "neither PEM, DER nor base64",
			"no user of the organization has Primary Email", "the certificate expired"}
		for i, r := range allResults(t, env, id) {
			if (want[i] == "") != (r.Status == jobs.ResultSuccess) || !strings.Contains(r.Message, want[i]) {
				t.Errorf("row %d: %s %q, want %q", r.Seq, r.Status, r.Message, want[i])
			}
		}
		es, _ := store.NewStore(db).Enrollments.List(context.Background(), env.Org.ID, users[1])
		sum := sha1.Sum(good) //nolint:gosec // G401: the thumbprint the product shows, not a protection
		if len(es) != 1 || es[0].FactorType != enrollment.FactorSmartCard || es[0].Value != "CN=User One" ||
			es[0].Thumbprint != strings.ToUpper(hex.EncodeToString(sum[:])) || !es[0].ExpiresAt.Equal(future) {
			t.Errorf("smart card enrollment %+v", es)
		}
	})
}

// Archives refused at upload: not a ZIP, too many entries, nothing in it,
// a pattern or config that does not apply.
func TestEnrollment_SmartCardsRefused(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{})
	tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
	ids := factorIDs(t, env, env.Org)
	path := "/api/v1/protection/quick-enrollment/upload-smartcards"
	pattern := [2]string{"certificate_filename_pattern", "Employee ID"}
	many := make([]zipFile, 10001)
	for i := range many {
		many[i] = zipFile{name: "E" + strings.Repeat("1", 1) + string(rune('a'+i%26)) + big.NewInt(int64(i)).String() + ".cer"}
	}
	for _, tc := range []struct {
		name   string
		fields [][2]string
		file   []byte
		detail string
	}{
		{"not a zip", [][2]string{pattern}, []byte("PK but not really"), "not a readable ZIP"},
		{"too many entries", [][2]string{pattern}, zipOf(t, many...), "more than 10000 entries"},
		{"empty archive", [][2]string{pattern}, zipOf(t), "holds no files"},
		{"bad pattern", [][2]string{{"certificate_filename_pattern", "Shoe Size"}}, zipOf(t, zipFile{"a.cer", nil}), "certificate_filename_pattern"},
		{"not a smart card config", [][2]string{pattern, {"factor_configs", ids[enrollment.FactorTOTP]}}, zipOf(t, zipFile{"a.cer", nil}), "not a smart card config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := upload(t, env, path, tok, tc.fields, "cards.zip", tc.file)
			if e := resp.ErrorBody(t); resp.Status != 400 || !strings.Contains(e.Detail, tc.detail) {
				t.Errorf("%d %s", resp.Status, resp.Body)
			}
		})
	}
	assertNothingStored(t, env.DB)
}
