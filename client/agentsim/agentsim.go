// Package agentsim plays device agents against a running service over the
// agent channel (/agent/v1): each simulated agent registers with an
// installation key, checks in with its facts and local accounts, carries
// out the commands it receives (link, unlink, remove_offline_user,
// uninstall) and acknowledges them at its next check-in. `iam agent
// simulate` runs it for demos, tests and benchmarks.
package agentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrRefused is a check-in the service refused (401): the device was
// uninstalled, or its credential is wrong.
var ErrRefused = errors.New("the service refused the device credential")

// Agent is one simulated device agent.
type Agent struct {
	BaseURL string
	HTTP    *http.Client
	// Facts are the device fields reported (spec 2.3).
	Facts map[string]any
	// Accounts are the local account names on the device.
	Accounts []string
	// Offline are the ids of users enrolled offline on the device.
	Offline []string

	ID, Secret string
	// Linked maps a local account to the identity user it is linked to, as
	// the device sees it.
	Linked map[string]string
	// Uninstalled is set once the agent carried out an uninstall.
	Uninstalled bool
	// Handled counts the commands carried out.
	Handled int
	acks    []Ack
}

// Ack is an answer to a command.
type Ack struct {
	CommandID string `json:"command_id"`
	Status    string `json:"status"`
	Message   string `json:"message,omitempty"`
}

// Answer is a check-in's answer.
type Answer struct {
	Commands           []map[string]any `json:"commands"`
	Settings           map[string]any   `json:"settings"`
	NextCheckinSeconds int              `json:"next_checkin_seconds"`
}

// defaultClient keeps enough idle connections for many agents at once (the
// standard client keeps two per host, so most requests would dial anew).
var defaultClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	Proxy: http.ProxyFromEnvironment, MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
}}

func (a *Agent) client() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	return defaultClient
}

func (a *Agent) post(ctx context.Context, path, auth string, body any, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return resp.StatusCode, &RateLimited{Wait: time.Duration(max(secs, 1)) * time.Second,
			Detail: fmt.Sprintf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(data))}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	return resp.StatusCode, json.Unmarshal(data, out)
}

// RateLimited is a request the service refused for now (429): try again
// after Wait.
type RateLimited struct {
	Wait   time.Duration
	Detail string
}

func (e *RateLimited) Error() string { return e.Detail }

// Register registers the agent's device with an installation key. An agent
// that has a credential already (ID and Secret) presents it, as a real
// agent registering again does, and so keeps its device; without it, the
// service would make a new device, flagged as a possible duplicate of the
// old one while that one is live. Refused for now (429), it waits as the
// service says and tries again, until ctx ends.
func (a *Agent) Register(ctx context.Context, key, platform string) error {
	var out struct {
		DeviceID     string `json:"device_id"`
		DeviceSecret string `json:"device_secret"`
	}
	auth := ""
	if a.ID != "" && a.Secret != "" {
		auth = "Device " + a.ID + ":" + a.Secret
	}
	for {
		_, err := a.post(ctx, "/agent/v1/register", auth, map[string]any{
			"installation_key": key, "agent_type": "DeviceAgent", "platform": platform, "facts": a.Facts,
		}, &out)
		var limited *RateLimited
		if !errors.As(err, &limited) {
			if err != nil {
				return err
			}
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(limited.Wait):
		}
	}
	a.ID, a.Secret = out.DeviceID, out.DeviceSecret
	if a.Linked == nil {
		a.Linked = map[string]string{}
	}
	return nil
}

// CheckIn reports the device, acknowledges the commands carried out since
// the last check-in, and carries out the commands of the answer (their acks
// go with the next check-in). ErrRefused once the credential is refused.
func (a *Agent) CheckIn(ctx context.Context) (*Answer, error) {
	accounts := make([]map[string]any, 0, len(a.Accounts))
	for _, n := range a.Accounts {
		accounts = append(accounts, map[string]any{"user_name": n, "permission_level": "Standard"})
	}
	offline := make([]map[string]any, 0, len(a.Offline))
	for _, id := range a.Offline {
		offline = append(offline, map[string]any{"id": id})
	}
	body := map[string]any{"facts": a.Facts, "local_accounts": accounts, "offline_enrolled_users": offline}
	if len(a.acks) > 0 {
		body["acks"] = a.acks
	}
	var ans Answer
	status, err := a.post(ctx, "/agent/v1/checkin", "Device "+a.ID+":"+a.Secret, body, &ans)
	if status == http.StatusUnauthorized {
		return nil, ErrRefused
	}
	if err != nil {
		return nil, err
	}
	a.acks = nil
	for _, c := range ans.Commands {
		a.carryOut(c)
	}
	return &ans, nil
}

// carryOut applies a command on the simulated device and queues its ack.
func (a *Agent) carryOut(c map[string]any) {
	id, _ := c["id"].(string)
	str := func(k string) string { s, _ := c[k].(string); return s }
	ack := Ack{CommandID: id, Status: "done"}
	switch str("type") {
	case "link":
		if !slices.Contains(a.Accounts, str("user_name")) {
			ack = Ack{CommandID: id, Status: "failed", Message: "no local account " + str("user_name")}
			break
		}
		a.Linked[str("user_name")] = str("idp_user_id")
	case "unlink":
		delete(a.Linked, str("user_name"))
	case "remove_offline_user":
		a.Offline = slices.DeleteFunc(a.Offline, func(u string) bool { return u == str("user_id") })
	case "uninstall":
		a.Uninstalled = true
	default:
		ack = Ack{CommandID: id, Status: "failed", Message: "unknown command " + str("type")}
	}
	a.Handled++
	a.acks = append(a.acks, ack)
}

// Config is a simulation: Devices agents of Accounts local accounts each,
// checking in every Interval.
type Config struct {
	BaseURL  string
	Key      string
	Devices  int
	Accounts int
	Interval time.Duration
	// Rounds stops after so many check-ins per agent; 0 runs until ctx ends.
	Rounds int
	// Prefix names the devices (<prefix>-<n>) and their serial numbers.
	Prefix string
	HTTP   *http.Client
}

// Stats are a simulation's figures.
type Stats struct {
	Registered, CheckIns, Errors, Refused, Commands int
	Latencies                                       []time.Duration
	Elapsed                                         time.Duration
}

// Percentile returns the p-th percentile (0-100) of the check-in latencies.
func (s *Stats) Percentile(p float64) time.Duration {
	if len(s.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(s.Latencies)
	slices.Sort(l)
	i := int(float64(len(l)-1) * p / 100)
	return l[i]
}

// NewAgents returns cfg's agents, not yet registered.
func NewAgents(cfg Config) []*Agent {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = "sim"
	}
	out := make([]*Agent, cfg.Devices)
	for i := range out {
		name := fmt.Sprintf("%s-%d", prefix, i)
		accs := make([]string, cfg.Accounts)
		for j := range accs {
			accs[j] = fmt.Sprintf("user%d", j)
		}
		out[i] = &Agent{BaseURL: cfg.BaseURL, HTTP: cfg.HTTP, Accounts: accs, Linked: map[string]string{},
			Facts: map[string]any{"name": name, "os_type": "Windows", "join_type": "SvcJoined", "serial_number": name,
				"dns_hostname": name + ".sim", "agent_version": "1.0.0", "ip_address": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}}
	}
	return out
}

// Run registers cfg's agents, then has each check in every interval
// (spread over the interval) for cfg.Rounds rounds or until ctx ends.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	agents := NewAgents(cfg)
	st := &Stats{}
	var mu sync.Mutex
	start := time.Now()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var regErr error
	for _, a := range agents {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := a.Register(ctx, cfg.Key, "windows")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				regErr = err
				return
			}
			st.Registered++
		}()
	}
	wg.Wait()
	if regErr != nil {
		return st, fmt.Errorf("register: %w", regErr)
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	for i, a := range agents {
		wg.Add(1)
		offset := time.Duration(int64(interval) * int64(i) / int64(max(len(agents), 1)))
		go func() {
			defer wg.Done()
			t := time.NewTimer(offset)
			defer t.Stop()
			for round := 0; cfg.Rounds == 0 || round < cfg.Rounds; round++ {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				t.Reset(interval)
				began := time.Now()
				before := a.Handled
				_, err := a.CheckIn(ctx)
				took := time.Since(began)
				mu.Lock()
				switch {
				case errors.Is(err, ErrRefused):
					st.Refused++
				case err != nil && ctx.Err() == nil:
					st.Errors++
				case err == nil:
					st.CheckIns++
					st.Latencies = append(st.Latencies, took)
					st.Commands += a.Handled - before
				}
				mu.Unlock()
				if errors.Is(err, ErrRefused) {
					return
				}
			}
		}()
	}
	wg.Wait()
	st.Elapsed = time.Since(start)
	return st, nil
}
