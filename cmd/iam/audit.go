package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"iam/models"
	"iam/models/audit"
	"iam/models/store"
)

// auditCommand checks and exports the audit log: `iam audit verify`,
// `iam audit export`, `iam audit seal`, on IAM_DATABASE_URL or dev's data
// directory as `iam token` does (docs/audit.md).
func auditCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify, export and seal the audit log",
		Long: "audit works on the audit log of IAM_DATABASE_URL, or of the SQLite file of `iam dev` " +
			"under --data-dir. verify checks the signed digests and every event, from the database " +
			"or from an export file and the public key alone.",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", "./data", "data directory of `iam dev` when IAM_DATABASE_URL is not set (env IAM_DATA_DIR)")
	var org int64
	cmd.PersistentFlags().Int64Var(&org, "org", 0, "the organization (default: every organization with audit events)")

	run := func(body func(cmd *cobra.Command, cfg Config, store *store.Store) error) func(*cobra.Command, []string) error {
		return configured(environ, func(cmd *cobra.Command, cfg Config) error {
			return withAdminStore(cmd, cfg, dataDir, newLogger(stderr, cfg.LogLevel), func(store *store.Store) error {
				return body(cmd, cfg, store)
			})
		})
	}
	orgs := func(ctx context.Context, store *store.Store) ([]int64, error) {
		if org != 0 {
			return []int64{org}, nil
		}
		return store.Digests.Orgs(ctx)
	}

	var file, publicKey, since string
	verifyCmd := &cobra.Command{
		Use:   "verify [--org ID] [--since TIME] [--file EXPORT.ndjson --public-key KEY]",
		Short: "Check the audit log: every digest's signature and chain, every event; exits 1 naming what was tampered with",
		Long: "verify checks each digest's signature and its place in the chain, and each event against " +
			"its digest, and names every event altered, inserted or removed and every digest missing, " +
			"altered or forged. Without --file it reads the database (the key is IAM_AUDIT_SIGNING_KEY's, " +
			"or dev's, unless --public-key names one); with --file it reads an export (`iam audit export`, " +
			"or the NDJSON of GET /audit-events and GET /audit-digests in one file) and needs only " +
			"--public-key: the key itself (base64), or a file holding it as PEM or base64.",
		Args: cobra.NoArgs,
		RunE: configured(environ, func(cmd *cobra.Command, cfg Config) error {
			var from time.Time
			if since != "" {
				t, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return fmt.Errorf("--since: %w", err)
				}
				from = t
			}
			if file != "" {
				key, err := readPublicKey(publicKey)
				if err != nil {
					return err
				}
				return verifyFile(file, org, []ed25519.PublicKey{key}, from, stdout)
			}
			return withAdminStore(cmd, cfg, dataDir, newLogger(stderr, cfg.LogLevel), func(store *store.Store) error {
				var keys []ed25519.PublicKey
				if publicKey != "" {
					key, err := readPublicKey(publicKey)
					if err != nil {
						return err
					}
					keys = append(keys, key)
				} else {
					dev := ""
					if cfg.DatabaseURL == "" {
						dev = cfg.Dev.DataDir
						if cmd.Flags().Changed("data-dir") {
							dev = dataDir
						}
					}
					signer, err := auditSigner(cfg, dev)
					if err != nil {
						return err
					}
					if signer == nil {
						return errors.New("no key to verify with: set IAM_AUDIT_SIGNING_KEY or give --public-key")
					}
					keys = append(keys, signer.PublicKey())
				}
				ids, err := orgs(cmd.Context(), store)
				if err != nil {
					return err
				}
				failed := 0
				for _, id := range ids {
					res, err := store.Digests.Verify(cmd.Context(), id, keys, from)
					if err != nil {
						return err
					}
					if err := report(stdout, id, res); err != nil {
						return err
					}
					failed += len(res.Problems)
				}
				if failed > 0 {
					return fmt.Errorf("the audit log does not verify: %d problem(s)", failed)
				}
				return nil
			})
		}),
	}
	verifyCmd.Flags().StringVar(&file, "file", "", "an export to verify instead of the database")
	verifyCmd.Flags().StringVar(&publicKey, "public-key", "", "the Ed25519 public key: base64, or a file of it as PEM or base64")
	verifyCmd.Flags().StringVar(&since, "since", "", "verify only the digests that end at or after this RFC 3339 time, and their events")

	var out string
	exportCmd := &cobra.Command{
		Use:   "export --org ID [--out FILE]",
		Short: "Write an organization's digests and events as NDJSON, for verify --file",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, _ Config, store *store.Store) (err error) {
			if org == 0 {
				return errors.New("--org is required")
			}
			w := stdout
			if out != "" {
				f, err := os.Create(out) //nolint:gosec // the file the operator named
				if err != nil {
					return err
				}
				defer joinClose(&err, f.Close)
				w = f
			}
			return exportAudit(cmd.Context(), store, org, w)
		}),
	}
	exportCmd.Flags().StringVar(&out, "out", "", "file to write (default: standard output)")

	sealCmd := &cobra.Command{
		Use:   "seal [--org ID]",
		Short: "Seal the events committed since the last digest now (the worker does it on its schedule)",
		Args:  cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, cfg Config, store *store.Store) error {
			dev := ""
			if cfg.DatabaseURL == "" {
				dev = dataDir
			}
			signer, err := auditSigner(cfg, dev)
			if err != nil {
				return err
			}
			if signer == nil {
				return errors.New("IAM_AUDIT_SIGNING_KEY is not set: nothing to seal with")
			}
			ids, err := orgs(cmd.Context(), store)
			if err != nil {
				return err
			}
			for _, id := range ids {
				d, err := store.Digests.Seal(cmd.Context(), id, signer, time.Now())
				if err != nil {
					return err
				}
				n := int64(0)
				if d != nil {
					n = d.EventCount
				}
				if _, err := fmt.Fprintf(stdout, "organization %d: %d event(s) sealed\n", id, n); err != nil {
					return err
				}
			}
			return nil
		}),
	}

	cmd.AddCommand(verifyCmd, exportCmd, sealCmd)
	return cmd
}

// report prints what the verification of organization org found.
func report(w io.Writer, org int64, res audit.Result) error {
	_, err := fmt.Fprintf(w, "organization %d: %d digest(s), %d event(s) sealed, %d not sealed yet", org, res.Digests, res.Sealed, res.Unsealed)
	if err == nil && res.Pruned > 0 {
		_, err = fmt.Fprintf(w, ", events up to %d pruned by retention", res.Pruned)
	}
	if err != nil {
		return err
	}
	if len(res.Problems) == 0 {
		_, err = fmt.Fprintln(w, ": verified")
		return err
	}
	if _, err := fmt.Fprintf(w, ": %d problem(s)\n", len(res.Problems)); err != nil {
		return err
	}
	for _, p := range res.Problems {
		if _, err := fmt.Fprintln(w, "  "+p); err != nil {
			return err
		}
	}
	return nil
}

// exportAudit writes the organization's digests, then its events, one
// JSON document a line.
func exportAudit(ctx context.Context, store *store.Store, org int64, w io.Writer) error {
	bw := bufio.NewWriter(w)
	for next := int64(1); ; {
		page, err := store.Digests.List(ctx, org, next, 1000)
		if err != nil {
			return err
		}
		for _, d := range page {
			b, err := json.Marshal(d)
			if err != nil {
				return err
			}
			if _, err := bw.Write(append(b, '\n')); err != nil {
				return err
			}
			next = d.Number + 1
		}
		if len(page) < 1000 {
			break
		}
	}
	err := store.Audit.Each(ctx, org, audit.Query{}, func(body string) error {
		_, err := bw.WriteString(body + "\n")
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// verifyFile verifies an export: its digests first (one pass), then its
// events in sequence order (a second pass), in constant memory but for the
// digests.
func verifyFile(path string, org int64, keys []ed25519.PublicKey, since time.Time, stdout io.Writer) error {
	type line struct {
		OrgID      string `json:"org_id"`
		EventsHash string `json:"events_hash"`
		Sequence   *int64 `json:"sequence"`
	}
	scan := func(fn func(raw []byte, l line) error) error {
		f, err := os.Open(path) //nolint:gosec // the file the operator named
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read only
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for n := 1; sc.Scan(); n++ {
			raw := sc.Bytes()
			if len(strings.TrimSpace(string(raw))) == 0 {
				continue
			}
			var l line
			if err := json.Unmarshal(raw, &l); err != nil {
				return fmt.Errorf("%s line %d: not JSON: %w", path, n, err)
			}
			if err := fn(raw, l); err != nil {
				return fmt.Errorf("%s line %d: %w", path, n, err)
			}
		}
		return sc.Err()
	}
	byOrg := map[int64][]audit.Digest{}
	var orgOrder []int64
	seen := func(id int64) {
		if _, ok := byOrg[id]; !ok {
			byOrg[id] = nil
			orgOrder = append(orgOrder, id)
		}
	}
	err := scan(func(raw []byte, l line) error {
		id, err := models.ParseID("org_id", l.OrgID)
		if err != nil {
			return err
		}
		if org != 0 && id != org {
			return nil
		}
		seen(id)
		if l.EventsHash != "" {
			var d audit.Digest
			if err := json.Unmarshal(raw, &d); err != nil {
				return err
			}
			byOrg[id] = append(byOrg[id], d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	failed := 0
	for _, id := range orgOrder {
		v := audit.NewVerificationSince(keys, byOrg[id], 0, 0, since)
		last := int64(0)
		err := scan(func(raw []byte, l line) error {
			if l.EventsHash != "" || l.Sequence == nil || l.OrgID != models.FormatID(id) {
				return nil
			}
			if *l.Sequence <= last {
				return fmt.Errorf("event %d is out of sequence order (after %d)", *l.Sequence, last)
			}
			last = *l.Sequence
			v.Event(audit.VerifyEvent{Sequence: *l.Sequence, Body: string(raw)})
			return nil
		})
		if err != nil {
			return err
		}
		res := v.Finish()
		if err := report(stdout, id, res); err != nil {
			return err
		}
		failed += len(res.Problems)
	}
	if failed > 0 {
		return fmt.Errorf("the audit log does not verify: %d problem(s)", failed)
	}
	return nil
}

// readPublicKey reads an Ed25519 public key: base64 of its 32 bytes, or a
// file holding that or a PEM PUBLIC KEY.
func readPublicKey(text string) (ed25519.PublicKey, error) {
	if text == "" {
		return nil, errors.New("--public-key is required with --file (GET /api/v1/audit-digests/public-key serves it)")
	}
	if b, err := os.ReadFile(text); err == nil { //nolint:gosec // the file the operator named
		text = string(b)
	}
	text = strings.TrimSpace(text)
	if block, _ := pem.Decode([]byte(text)); block != nil {
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("--public-key: %w", err)
		}
		if key, ok := k.(ed25519.PublicKey); ok {
			return key, nil
		}
		return nil, errors.New("--public-key: not an Ed25519 key")
	}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("--public-key: not an Ed25519 public key (32 bytes, base64) nor a file of one")
	}
	return ed25519.PublicKey(raw), nil
}
