package api_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"mime/multipart"
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
)

// testCA is a certificate authority for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newTestCA(t *testing.T, cn string, isCA bool, notAfter time.Time) *testCA {
	t.Helper()
	return newTestCAValid(t, cn, isCA, time.Now().Add(-72*time.Hour), notAfter)
}

// newTestCAValid is newTestCA valid from notBefore.
func newTestCAValid(t *testing.T, cn string, isCA bool, notBefore, notAfter time.Time) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, BasicConstraintsValid: true, IsCA: isCA,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, der: der}
}

// issue makes a user certificate signed by the CA naming email.
func (ca *testCA) issue(t *testing.T, cn, email string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		EmailAddresses: []string{email}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// caForm builds the multipart body of a CA config.
func caForm(t *testing.T, fields map[string]string, file []byte) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := w.CreateFormFile("ca_file", "ca.cer")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(file); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

type caBody struct {
	ID          string    `json:"id"`
	IsEnabled   bool      `json:"is_enabled"`
	CAFile      string    `json:"ca_file"`
	SubjectName string    `json:"subject_name"`
	Thumbprint  string    `json:"thumbprint"`
	Mapping     string    `json:"certificate_mapping_attribute"`
	ExpiresOn   time.Time `json:"expires_on"`
}

// TestCAConfigs: CAs are added (PEM or DER), refused when not a CA or
// expired, listed, changed and removed; smart-card enrollment then accepts
// certificates an enabled CA signed for the user, and fails the rows of
// certificates of a disabled or unknown CA, or naming another user.
func TestCAConfigs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true})
		users := seedUsers(t, db, env.Org, 6)
		tok := env.Token(env.Org, "svc.auth.ALL")
		qtok := env.Token(env.Org, "svc.quick_enrollment.ALL")
		smart := factorIDs(t, env, env.Org)[enrollment.FactorSmartCard]
		base := "/api/v1/protection/authnfactor-configs/" + smart + "/ca-configs"
		send := func(method, path string, fields map[string]string, file []byte) *apitest.Response {
			body, ct := caForm(t, fields, file)
			return env.Do(apitest.Request{Method: method, Path: path, Token: tok, Body: body, Header: http.Header{"Content-Type": {ct}}})
		}
		year := time.Now().Add(365 * 24 * time.Hour)
		enabled := newTestCA(t, "Enabled CA", true, year)
		disabled := newTestCA(t, "Disabled CA", true, year)
		unknown := newTestCA(t, "Unknown CA", true, year)

		pemFile := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: enabled.der})
		resp := send("POST", base, map[string]string{"certificate_mapping_attribute": "email"}, pemFile)
		if resp.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		var one struct{ Data caBody }
		resp.JSON(t, &one)
		if !one.Data.IsEnabled || one.Data.SubjectName != "CN=Enabled CA" || len(one.Data.Thumbprint) != 40 ||
			!strings.Contains(one.Data.CAFile, "BEGIN CERTIFICATE") || !one.Data.ExpiresOn.Equal(enabled.cert.NotAfter) {
			t.Fatalf("created %+v", one.Data)
		}
		resp = send("POST", base, map[string]string{"certificate_mapping_attribute": "email", "is_enabled": "false"}, disabled.der)
		var dis struct{ Data caBody }
		resp.JSON(t, &dis)
		if resp.Status != http.StatusCreated || dis.Data.IsEnabled {
			t.Fatalf("create disabled (DER): %d %s", resp.Status, resp.Body)
		}
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "email"}, enabled.der), 409, "00000105", "thumbprint")
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "email"},
			newTestCA(t, "Leaf", false, year).der), 400, "00000109", "not a certificate authority")
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "email"},
			newTestCA(t, "Old CA", true, time.Now().Add(-time.Hour)).der), 400, "00000109", "expired")
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "email"},
			newTestCAValid(t, "Future CA", true, time.Now().Add(24*time.Hour), year).der), 400, "00000109", "not valid yet: it becomes valid on")
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "shoeSize"}, unknown.der), 400, "00000109", "certificate_mapping_attribute")
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "email"}, []byte("junk")), 400, "00000109", "ca_file")
		wantError(t, send("POST", base, map[string]string{"certificate_mapping_attribute": "email"}, bytes.Repeat([]byte("A"), enrollment.MaxCAFileBytes+1)), 413, "00000110", "")
		wantError(t, send("POST", "/api/v1/protection/authnfactor-configs/"+factorIDs(t, env, env.Org)[enrollment.FactorTOTP]+"/ca-configs",
			map[string]string{"certificate_mapping_attribute": "email"}, unknown.der), 400, "00000109", "smart card")

		resp = env.Get(base, tok)
		var list struct{ Data []caBody }
		resp.JSON(t, &list)
		if resp.Status != 200 || len(list.Data) != 2 {
			t.Fatalf("list: %d %s", resp.Status, resp.Body)
		}
		// Another organization sees neither the config nor its CAs.
		other := env.NewOrg("Other")
		wantError(t, env.Get(base+"/"+one.Data.ID, env.Token(other, "svc.auth.ALL")), 404, "00000103", "")

		enroll := func(files ...zipFile) []jobs.JobResult {
			t.Helper()
			up := upload(t, env, "/api/v1/protection/quick-enrollment/upload-smartcards", qtok,
				[][2]string{{"certificate_filename_pattern", "Primary Email"}, {"factor_configs", smart}}, "cards.zip", zipOf(t, files...))
			if up.Status != http.StatusAccepted {
				t.Fatalf("upload: %d %s", up.Status, up.Body)
			}
			var acc acceptedBody
			up.JSON(t, &acc)
			id, _ := models.ParseID("id", acc.Data.ID)
			env.WaitJob(env.Org, id, time.Minute, finished)
			return allResults(t, env, id)
		}
		results := enroll(
			zipFile{"user1@example.com.cer", enabled.issue(t, "User One", "user1@example.com")},   // 1: enabled CA, right user
			zipFile{"user2@example.com.cer", disabled.issue(t, "User Two", "user2@example.com")},  // 2: disabled CA
			zipFile{"user3@example.com.cer", unknown.issue(t, "User Three", "user3@example.com")}, // 3: unknown CA
			zipFile{"user4@example.com.cer", enabled.issue(t, "User Four", "user1@example.com")},  // 4: enabled CA, names another user
		)
		want := []string{"", "not signed by an enabled certificate authority", "not signed by an enabled certificate authority", "does not name the user by email"}
		for i, r := range results {
			if (want[i] == "") != (r.Status == jobs.ResultSuccess) || !strings.Contains(r.Message, want[i]) {
				t.Errorf("row %d: %s %q, want %q", r.Seq, r.Status, r.Message, want[i])
			}
		}
		if es, _ := env.Store.Enrollments.List(context.Background(), env.Org.ID, users[1]); len(es) != 1 {
			t.Errorf("user1 enrollments %+v", es)
		}

		// The Certificate column of a CSV is checked alike.
		b64 := func(der []byte) string { return base64.StdEncoding.EncodeToString(der) }
		csvJob := uploadCSV(t, env, qtok, [][2]string{{"factor_configs", smart}}, "Primary Email,Certificate\n"+
			"user5@example.com,"+b64(enabled.issue(t, "User Five", "user5@example.com"))+"\n"+
			"user6@example.com,"+b64(unknown.issue(t, "User Six", "user6@example.com"))+"\n")
		env.WaitJob(env.Org, csvJob, time.Minute, finished)
		csvRows := allResults(t, env, csvJob)
		if len(csvRows) != 2 || csvRows[0].Status != jobs.ResultSuccess || csvRows[1].Status == jobs.ResultSuccess ||
			!strings.Contains(csvRows[1].Message, "not signed by an enabled certificate authority") {
			t.Errorf("CSV rows %+v", csvRows)
		}

		// Enabling the disabled CA lets its certificate through.
		resp = send("PATCH", base+"/"+dis.Data.ID, map[string]string{"is_enabled": "true"}, nil)
		if resp.Status != 200 {
			t.Fatalf("patch: %d %s", resp.Status, resp.Body)
		}
		if r := enroll(zipFile{"user2@example.com.cer", disabled.issue(t, "User Two", "user2@example.com")}); r[0].Status != jobs.ResultSuccess {
			t.Errorf("after enabling: %+v", r[0])
		}
		// With no enabled CA left, certificates enroll unchecked as before.
		for _, id := range []string{one.Data.ID, dis.Data.ID} {
			if resp := env.Do(apitest.Request{Method: "DELETE", Path: base + "/" + id, Token: tok}); resp.Status != 204 {
				t.Fatalf("delete: %d %s", resp.Status, resp.Body)
			}
		}
		if r := enroll(zipFile{"user3@example.com.cer", unknown.issue(t, "User Three", "user3@example.com")}); r[0].Status != jobs.ResultSuccess {
			t.Errorf("without enabled CAs: %+v", r[0])
		}
	})
}
