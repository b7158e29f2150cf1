package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/deploy/devserver"
	"iam/models/identity"
	"iam/models/management"
	"iam/models/secret"
	"iam/models/sqldb"
	"iam/models/store"
	"iam/workflows"
)

const (
	adminEmail = "bench-admin@example.com"
	secretKey  = "uploadbench-secret-key-0123456789abcdef-0123456789" //nolint:gosec // the secret of the benchmark's throwaway service
	// maxFile is the most bytes a management upload's file may hold.
	maxFile = 32 << 20
	// uploadPath is the route measured.
	uploadPath = "/api/v1/management/actions/delete-users/uploads"
)

// writeCSV writes the benchmark file: a Primary Email column naming user i
// on row i, then columns-1 columns of filler, the cells as long as the
// file's 32 MiB allows. It returns the file's path and size.
func writeCSV(work string, rows, columns int) (string, int64, error) {
	if columns < 1 || rows < 1 {
		return "", 0, fmt.Errorf("need at least one row and one column")
	}
	var header strings.Builder
	header.WriteString("Primary Email")
	for c := 2; c <= columns; c++ {
		fmt.Fprintf(&header, ",Column %d", c)
	}
	header.WriteString("\n")
	emails := 0
	for i := 1; i <= rows; i++ {
		emails += len(email(i)) + 1 // and its line feed
	}
	cell := 0
	if columns > 1 {
		// Each filler cell is a comma and cell bytes.
		cell = (maxFile-header.Len()-emails)/(rows*(columns-1)) - 1
		cell = min(cell, management.MaxUploadCellLen)
	}
	path := filepath.Join(work, "upload.csv")
	f, err := os.Create(path) //nolint:gosec // a file in the benchmark's work folder
	if err != nil {
		return "", 0, err
	}
	// A bufio.Writer keeps its first error, and its writes do nothing after
	// it: Flush below returns it.
	w := bufio.NewWriterSize(f, 1<<20)
	_, _ = w.WriteString(header.String())
	filler := []byte(strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", cell/36+2))
	for i := 1; i <= rows; i++ {
		_, _ = w.WriteString(email(i))
		for c := 2; c <= columns; c++ {
			_ = w.WriteByte(',')
			off := (i + c) % 36 // cells differ from one another
			_, _ = w.Write(filler[off : off+cell])
		}
		_ = w.WriteByte('\n')
	}
	if err = w.Flush(); err != nil {
		return "", 0, err
	}
	if err = f.Close(); err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, err
	}
	if fi.Size() > maxFile {
		return "", 0, fmt.Errorf("the CSV is %d bytes, over %d", fi.Size(), maxFile)
	}
	return path, fi.Size(), nil
}

func email(i int) string { return "user" + strconv.Itoa(i) + "@example.com" }

// bench is the database, the Temporal server and the environment the serve
// processes share.
type bench struct {
	bin, work string
	env       []string
	db        *bun.DB
	ts        *devserver.Server
	token     string
}

// newBench migrates the database and seeds an organization with an
// administrator and the users the CSV names; it starts the Temporal server.
func newBench(ctx context.Context, bin, work, dsn string, rows int) (_ *bench, err error) {
	b := &bench{bin: bin, work: work}
	defer func() { // a half-made bench is closed
		if err != nil {
			err = errors.Join(err, b.close())
		}
	}()
	b.env = []string{"IAM_DATA_DIR=" + filepath.Join(work, "data"), "IAM_SECRET_KEY=" + secretKey, "IAM_LOG_LEVEL=warn",
		"IAM_ENCRYPTION_KEY=" + secret.NewKey(), "IAM_DATABASE_URL=" + dsn}
	fmt.Printf("migrating and seeding %d users ...\n", rows)
	if out, migrateErr := iamproc.Run(bin, b.env, "migrate", "up"); migrateErr != nil {
		return nil, fmt.Errorf("migrate: %w\n%s", migrateErr, out)
	}
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	b.db = db
	store := store.NewStore(db)
	org := &identity.Organization{Name: "Bench"}
	if err = store.Orgs.Create(ctx, org); err != nil {
		return nil, err
	}
	admin := &identity.User{OrgID: org.ID, Email: adminEmail, Role: identity.RoleAdmin, Status: identity.UserActive}
	if err = store.Users.Create(ctx, admin, ""); err != nil {
		return nil, err
	}
	if err = seedUsers(ctx, db, org.ID, rows); err != nil {
		return nil, fmt.Errorf("seed users: %w", err)
	}
	ts, err := devserver.Start(ctx, devserver.Config{DataDir: filepath.Join(work, "temporal"), DisableUI: true,
		SearchAttributes: workflows.SearchAttributes()})
	if err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	b.ts = ts
	b.env = append(b.env, "IAM_TEMPORAL_ADDRESS="+ts.FrontendAddress(), "IAM_TEMPORAL_NAMESPACE="+ts.Namespace())
	if b.token, err = iamproc.Token(bin, b.env, adminEmail, "svc.management.ALL"); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bench) close() error {
	var err error
	if b.ts != nil {
		err = b.ts.Stop()
	}
	if b.db != nil {
		err = errors.Join(err, b.db.Close())
	}
	return err
}

// seedUsers creates users user1..userN@example.com of org, 1,000 a
// statement.
func seedUsers(ctx context.Context, db *bun.DB, orgID int64, n int) error {
	type seedUser struct {
		bun.BaseModel `bun:"table:users"`
		ID            int64     `bun:"id"`
		OrgID         int64     `bun:"org_id"`
		Email         string    `bun:"email"`
		CreatedAt     time.Time `bun:"created_at"`
		UpdatedAt     time.Time `bun:"updated_at"`
	}
	now := time.Now().UTC()
	for start := 1; start <= n; start += 1000 {
		var users []seedUser
		for i := start; i <= min(start+999, n); i++ {
			users = append(users, seedUser{ID: sqldb.NewID(), OrgID: orgID, Email: email(i), CreatedAt: now, UpdatedAt: now})
		}
		if _, err := db.NewInsert().Model(&users).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// result is one serve process's run: its peak RSS before and after the
// uploads, how many were sent, how many answers were 429, and how long
// they took.
type result struct {
	uploads, refused int
	idleKB, peakKB   int64
	wall             time.Duration
}

// measure starts a fresh `iam serve`, sends n uploads of the CSV at once
// and reads the process's peak RSS after every one has answered 201.
func (b *bench) measure(ctx context.Context, csvPath string, n int) (result, error) {
	r := result{uploads: n}
	port, err := iamproc.FreePort()
	if err != nil {
		return r, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	api, err := iamproc.Start(b.bin, b.work, "serve", append(b.env, "IAM_HTTP_ADDR="+addr))
	if err != nil {
		return r, err
	}
	defer api.Stop()
	base := "http://" + addr
	if err := iamproc.WaitFor(base+"/readyz", 2*time.Minute); err != nil {
		return r, err
	}
	r.idleKB = vmHWM(api.Pid())
	fmt.Printf("[%d at once] serve idle: %s; uploading ...\n", n, memStatus(api.Pid()))
	began := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refused, err := b.upload(ctx, base, csvPath)
			mu.Lock()
			defer mu.Unlock()
			r.refused += refused
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(began)
	if len(errs) > 0 {
		return r, errs[0]
	}
	r.peakKB = vmHWM(api.Pid())
	fmt.Printf("[%d at once] serve after %.1f s: %s\n", n, r.wall.Seconds(), memStatus(api.Pid()))
	return r, nil
}

// upload sends the CSV until it is answered 201, waiting out each 429's
// Retry-After, and returns the number of 429s.
func (b *bench) upload(ctx context.Context, base, csvPath string) (int, error) {
	refused := 0
	for {
		status, retry, body, err := b.post(ctx, base, csvPath)
		if err != nil {
			return refused, err
		}
		switch status {
		case http.StatusCreated:
			return refused, nil
		case http.StatusTooManyRequests:
			refused++
			wait, err := strconv.Atoi(retry)
			if err != nil || wait < 1 {
				return refused, fmt.Errorf("429 with Retry-After %q", retry)
			}
			time.Sleep(time.Duration(wait) * time.Second)
		default:
			return refused, fmt.Errorf("upload: %d %s", status, body)
		}
	}
}

// post streams the CSV as a multipart form.
func (b *bench) post(ctx context.Context, base, csvPath string) (_ int, _, _ string, err error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeForm(mw, csvPath)) }()
	req, err := http.NewRequestWithContext(ctx, "POST", base+uploadPath, pr)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", "Service-oauthtoken "+b.token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body), nil
}

// writeForm writes the form of the upload to mw: the file at csvPath.
func writeForm(mw *multipart.Writer, csvPath string) (err error) {
	f, err := os.Open(csvPath) //nolint:gosec // the CSV the benchmark wrote
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, f.Close)
	fw, err := mw.CreateFormFile("file", filepath.Base(csvPath))
	if err != nil {
		return err
	}
	if _, err = io.Copy(fw, f); err != nil {
		return err
	}
	return mw.Close()
}

// memStatus reads a process's memory figures (VmHWM, VmRSS) as one line.
func memStatus(pid int) string {
	return fmt.Sprintf("VmHWM %.1f MiB, VmRSS %.1f MiB", mib(procStatus(pid, "VmHWM:")), mib(procStatus(pid, "VmRSS:")))
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(pid int) int64 { return procStatus(pid, "VmHWM:") }

// procStatus reads a figure in KiB from /proc/<pid>/status.
func procStatus(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb
		}
	}
	return 0
}
