package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"iam/cmd/internal/benchrun"
	"iam/cmd/internal/iamproc"
	"iam/deploy/devserver"
	"iam/models/identity"
	"iam/models/secret"
	"iam/models/sqldb"
	modelstore "iam/models/store"
	"iam/workflows"
)

const (
	adminEmail = "bench-admin@example.com"
	secretKey  = "enrollbench-secret-key-0123456789abcdef-0123456789" //nolint:gosec // the secret of the benchmark's throwaway service
)

// writeCSV writes the benchmark file: one user per row, SMS OTP numbers.
func writeCSV(path string, rows int) (err error) {
	f, err := os.Create(path) //nolint:gosec // a file in the benchmark's work folder
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, f.Close)
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err = w.WriteString("Primary Email,Mobile Number\n"); err != nil {
		return err
	}
	for i := 1; i <= rows; i++ {
		if _, err = fmt.Fprintf(w, "user%d@example.com,+1415%07d\n", i, i); err != nil {
			return err
		}
	}
	return w.Flush()
}

// measure runs one mode: dsn "" is the embedded default (SQLite), one
// `iam dev` process holding the API, a worker and the Temporal server. On
// PostgreSQL the production shape runs instead: `iam serve` and `iam worker`
// as processes of their own against a Temporal server in this process, so
// that the API's memory is measured alone.
func measure(ctx context.Context, bin, work, csvPath string, rows, chunkRows int, dsn string) (_ result, err error) {
	r := result{mode: "PostgreSQL (serve + worker)", loadKind: "COPY"}
	dataDir := filepath.Join(work, "data-pg")
	if dsn == "" {
		r.mode, r.loadKind = "SQLite (iam dev, default)", "prepared INSERT in one transaction"
		dataDir = filepath.Join(work, "data-sqlite")
	}
	env := []string{"IAM_DATA_DIR=" + dataDir, "IAM_SECRET_KEY=" + secretKey, "IAM_LOG_LEVEL=warn",
		"IAM_ENCRYPTION_KEY=" + secret.NewKey(), "IAM_DEV_TEMPORAL_PORT=0", "IAM_DEV_UI_PORT=0"}
	storeURL := dsn
	if dsn != "" {
		env = append(env, "IAM_DATABASE_URL="+dsn)
	} else {
		storeURL = "sqlite:" + filepath.Join(dataDir, "iam.db")
	}
	fmt.Printf("[%s] migrating and seeding %d users ...\n", r.mode, rows)
	if out, migrateErr := iamproc.Run(bin, append(env, "IAM_DATABASE_URL="+storeURL), "migrate", "up"); migrateErr != nil {
		return r, fmt.Errorf("migrate: %w\n%s", migrateErr, out)
	}
	db, err := sqldb.Open(ctx, storeURL)
	if err != nil {
		return r, err
	}
	defer benchrun.Cleanup(&err, db.Close)
	store := modelstore.NewStore(db)
	org := &identity.Organization{Name: "Bench"}
	if err = store.Orgs.Create(ctx, org); err != nil {
		return r, err
	}
	admin := &identity.User{OrgID: org.ID, Email: adminEmail, Role: identity.RoleAdmin, Status: identity.UserActive}
	if err = modelstore.NewStore(db).Users.Create(ctx, admin, ""); err != nil {
		return r, err
	}
	if err = seedUsers(ctx, db, org.ID, rows); err != nil {
		return r, fmt.Errorf("seed users: %w", err)
	}

	port, err := iamproc.FreePort()
	if err != nil {
		return r, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var api, worker *iamproc.Process
	if dsn == "" {
		if api, err = iamproc.Start(bin, work, "dev", append(env, "IAM_HTTP_ADDR="+addr)); err != nil {
			return r, err
		}
	} else {
		var ts *devserver.Server
		if ts, err = devserver.Start(ctx, devserver.Config{DataDir: filepath.Join(work, "temporal-pg"), DisableUI: true,
			SearchAttributes: workflows.SearchAttributes()}); err != nil {
			return r, fmt.Errorf("temporal: %w", err)
		}
		defer benchrun.Cleanup(&err, ts.Stop)
		env = append(env, "IAM_TEMPORAL_ADDRESS="+ts.FrontendAddress(), "IAM_TEMPORAL_NAMESPACE="+ts.Namespace())
		if worker, err = iamproc.Start(bin, work, "worker", env); err != nil {
			return r, err
		}
		defer worker.Stop()
		if api, err = iamproc.Start(bin, work, "serve", append(env, "IAM_HTTP_ADDR="+addr)); err != nil {
			return r, err
		}
	}
	defer api.Stop()
	base := "http://" + addr
	if err = iamproc.WaitFor(base+"/readyz", 2*time.Minute); err != nil {
		return r, err
	}
	token, err := iamproc.Token(bin, env, adminEmail, "svc.quick_enrollment.ALL", "svc.job.READ")
	if err != nil {
		return r, err
	}
	cfgID, err := smsConfig(base, token)
	if err != nil {
		return r, err
	}

	r.idle = memStatus(api.Pid())
	fmt.Printf("[%s] uploading %s ...\n", r.mode, csvPath)
	began := time.Now()
	jobID, err := uploadFile(base, token, cfgID, csvPath, chunkRows)
	if err != nil {
		return r, err
	}
	r.upload = time.Since(began)
	r.peakKB = vmHWM(api.Pid())
	var last string
	for {
		status, processed, statusErr := jobStatus(base, token, jobID)
		if statusErr != nil {
			return r, statusErr
		}
		if p := fmt.Sprintf("%s %d/%d", status, processed, rows); p != last {
			last = p
			fmt.Printf("[%s] %5.1f s  %s\n", r.mode, time.Since(began).Seconds(), p)
		}
		if status == "COMPLETED" || status == "WARNING" || status == "ERROR" {
			r.job = time.Since(began)
			if status != "COMPLETED" {
				return r, fmt.Errorf("the job ended %s", status)
			}
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.endKB = vmHWM(api.Pid())
	r.end = memStatus(api.Pid())
	r.apiCPU = iamproc.CPUTime(api.Pid())
	if worker != nil {
		r.workerKB, r.workerCPU = vmHWM(worker.Pid()), iamproc.CPUTime(worker.Pid())
	}
	fmt.Printf("[%s] job COMPLETED in %.1f s; timing the bulk load ...\n", r.mode, r.job.Seconds())
	r.loadEnroll, r.loadResults, err = bulkLoad(ctx, db, org.ID, cfgID, rows)
	return r, err
}

func authed(method, url, token string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Service-oauthtoken "+token)
	return http.DefaultClient.Do(req)
}

func smsConfig(base, token string) (_ string, err error) {
	resp, err := authed("GET", base+"/api/v1/protection/authnfactor-configs", token, nil)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	var raw struct {
		Data []map[string]any `json:"data"`
	}
	if err = json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return "", err
	}
	for _, c := range raw.Data {
		if c["factor_type"] == "SMS_OTP" {
			return fmt.Sprint(c["id"]), nil
		}
	}
	return "", fmt.Errorf("no SMS OTP config (status %d)", resp.StatusCode)
}

// uploadFile streams the CSV as a multipart form: fields first, the file last.
func uploadFile(base, token, cfgID, path string, chunkRows int) (_ string, err error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeForm(mw, cfgID, path, chunkRows)) }()
	req, _ := http.NewRequest("POST", base+"/api/v1/protection/quick-enrollment/upload-csv", pr)
	req.Header.Set("Authorization", "Service-oauthtoken "+token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("upload: %d %s", resp.StatusCode, body)
	}
	var acc struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err = json.Unmarshal(body, &acc); err != nil {
		return "", err
	}
	return acc.Data.ID, nil
}

// writeForm writes the upload form to mw: fields first, the file last.
func writeForm(mw *multipart.Writer, cfgID, path string, chunkRows int) (err error) {
	f, err := os.Open(path) //nolint:gosec // the CSV the benchmark wrote
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, f.Close)
	if err = mw.WriteField("factor_configs", cfgID); err != nil {
		return err
	}
	if err = mw.WriteField("file_encoding", "UTF-8"); err != nil {
		return err
	}
	if chunkRows > 0 {
		if err = mw.WriteField("chunk_rows", strconv.Itoa(chunkRows)); err != nil {
			return err
		}
	}
	fw, err := mw.CreateFormFile("file", filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err = io.Copy(fw, f); err != nil {
		return err
	}
	return mw.Close()
}

func jobStatus(base, token, id string) (_ string, _ int64, err error) {
	resp, err := authed("GET", base+"/api/v1/jobs/"+id+"?fields=status", token, nil)
	if err != nil {
		return "", 0, err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	var j struct {
		Status   string `json:"status"`
		Progress struct {
			Processed int64 `json:"processed"`
		} `json:"progress"`
	}
	if err = json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return "", 0, err
	}
	return j.Status, j.Progress.Processed, nil
}

// memStatus reads a process's memory figures (VmRSS, RssAnon, RssFile,
// VmHWM) as one line.
func memStatus(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range []string{"VmHWM:", "VmRSS:", "RssAnon:", "RssFile:"} {
			if strings.HasPrefix(line, k) {
				kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				parts = append(parts, fmt.Sprintf("%s %.1f MiB", strings.TrimSuffix(k, ":"), float64(kb)/1024))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb
		}
	}
	return 0
}
