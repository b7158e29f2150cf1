package enrollment

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // SHA-1 makes the certificate thumbprint, an identifier Windows shows, not a security check
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"strings"
	"time"
)

// CertificateInfo is what a smart-card enrollment keeps of a certificate.
type CertificateInfo struct {
	Subject    string
	Thumbprint string // SHA-1 of the DER bytes, upper-case hex
	NotAfter   time.Time
	// Cert is the parsed certificate, for the CA checks.
	Cert *x509.Certificate
}

// maxCertificateBytes bounds the size of one certificate file.
const maxCertificateBytes = 64 << 10

// ParseCertificate reads one X.509 certificate written as PEM (the first
// CERTIFICATE block), DER, or base64 of DER (a .cer file in text form): the
// certificates of smart-card enrollments and the CA files of CA configs. The
// error text is fit to show as a row's message or a field's detail.
func ParseCertificate(data []byte) (*CertificateInfo, error) {
	if len(data) > maxCertificateBytes {
		return nil, errors.New("the certificate is larger than 64 KiB")
	}
	der, err := certificateDER(data)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, errors.New("not an X.509 certificate")
	}
	sum := sha1.Sum(cert.Raw) //nolint:gosec // the thumbprint (see the import)
	return &CertificateInfo{
		Subject:    cert.Subject.String(),
		Thumbprint: strings.ToUpper(hex.EncodeToString(sum[:])),
		NotAfter:   cert.NotAfter.UTC(),
		Cert:       cert,
	}, nil
}

func certificateDER(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("the certificate is empty")
	}
	if bytes.Contains(trimmed, []byte("-----BEGIN")) {
		rest := trimmed
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				return nil, errors.New("no CERTIFICATE block in the PEM text")
			}
			if block.Type == "CERTIFICATE" {
				return block.Bytes, nil
			}
		}
	}
	if trimmed[0] == 0x30 { // an ASN.1 SEQUENCE: DER
		return data, nil
	}
	compact := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, string(trimmed))
	der, err := base64.StdEncoding.DecodeString(compact)
	if err != nil {
		return nil, errors.New("neither PEM, DER nor base64 of a certificate")
	}
	return der, nil
}
