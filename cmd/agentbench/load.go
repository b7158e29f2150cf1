package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"iam/cmd/internal/benchrun"
)

// checkinMode is what the measured check-ins report.
type checkinMode int

const (
	// unchanged: what the device reported at its previous check-in.
	unchanged checkinMode = iota
	// changed: one local account changed (its last_login flips).
	changed
	// changedFirst: the first check-in after registration (accounts new).
	changedFirst
	// healthz: GET /healthz instead of a check-in (the control).
	healthz
)

func (m checkinMode) String() string {
	switch m {
	case unchanged:
		return "unchanged"
	case changed:
		return "changed"
	}
	return "first"
}

// device is one registered device with its check-in requests built ahead.
type device struct {
	auth string
	// bodies are the two check-ins of the device: identical but for the
	// last_login of its first local account.
	bodies [2][]byte
	// variant is which body the service last recorded.
	variant atomic.Uint32
}

// generator is the load generator: one keep-alive client, a fixed set of
// connections, requests built before the clock starts.
type generator struct {
	base   string
	client *http.Client
	devs   []*device
}

func newGenerator(base string, conns int) *generator {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, MaxConnsPerHost: conns,
		IdleConnTimeout: time.Minute, DisableCompression: true}
	return &generator{base: base, client: &http.Client{Transport: tr, Timeout: time.Minute}}
}

func facts(i int) map[string]any {
	name := fmt.Sprintf("bench-%d", i)
	return map[string]any{"name": name, "os_type": "Windows", "os_distribution": "Windows 11 Enterprise",
		"os_major_version": "10", "os_build_version": "22631", "join_type": "SvcJoined", "serial_number": name,
		"dns_hostname": name + ".bench", "agent_version": "1.0.0", "domain": "bench.example",
		"ip_address": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}
}

// register registers n devices with the installation key, conns at a
// time, and builds their check-ins.
func (g *generator) register(key string, n, accounts, conns int) error {
	g.devs = make([]*device, n)
	login := [2]time.Time{time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)}
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f := facts(i)
				body, _ := json.Marshal(map[string]any{"installation_key": key, "agent_type": "DeviceAgent", "platform": "windows", "facts": f})
				var out struct {
					DeviceID     string `json:"device_id"`
					DeviceSecret string `json:"device_secret"`
				}
				if err := g.post("/agent/v1/register", "", body, http.StatusCreated, &out); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				d := &device{auth: "Device " + out.DeviceID + ":" + out.DeviceSecret}
				for v := range d.bodies {
					accs := make([]map[string]any, accounts)
					for j := range accs {
						accs[j] = map[string]any{"user_name": fmt.Sprintf("user%d", j), "permission_level": "Standard",
							"last_login": login[0]}
					}
					if accounts > 0 {
						accs[0]["last_login"] = login[v]
					}
					d.bodies[v], _ = json.Marshal(map[string]any{"facts": f, "local_accounts": accs, "offline_enrolled_users": []any{}})
				}
				g.devs[i] = d
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func (g *generator) post(path, auth string, body []byte, want int, out any) (err error) {
	req, err := http.NewRequest(http.MethodPost, g.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	if resp.StatusCode != want || out != nil {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != want {
			return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(data))
		}
		return json.Unmarshal(data, out)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

func (g *generator) get(path string) (err error) {
	resp, err := g.client.Get(g.base + path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, resp.Body.Close()) }()
	if _, err = io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return nil
}

// phase is one measured run: duration (or count check-ins) of mode over
// conns connections, closed-loop, or open-loop at rate check-ins/s.
type phase struct {
	name     string
	mode     checkinMode
	conns    int
	duration time.Duration
	count    int
	rate     float64
}

type stats struct {
	name            string
	count, errors   int
	firstErr        string
	lat             []time.Duration
	elapsed         time.Duration
	genCPU          time.Duration
	serveCPU, pgCPU time.Duration
	sorted          bool
}

func (s *stats) perSecond() float64 { return float64(s.count) / s.elapsed.Seconds() }

func (s *stats) percentile(p float64) time.Duration {
	if !s.sorted {
		slices.Sort(s.lat)
		s.sorted = true
	}
	return benchrun.Percentile(s.lat, p)
}

func (s *stats) line() string {
	return fmt.Sprintf("%d in %.1f s: %.0f/s, p50 %.2f ms, p99 %.2f ms, errors %d, generator CPU %.1f s",
		s.count, s.elapsed.Seconds(), s.perSecond(), ms(s.percentile(50)), ms(s.percentile(99)), s.errors, s.genCPU.Seconds())
}

// measure runs a phase. Closed loop: each of conns workers sends its next
// check-in when the previous one is answered. Open loop: check-in k is due
// at start + k/rate and its latency counts from then, so a check-in that
// waits for a free worker counts its wait. Devices are taken in turn, so a
// device checks in again only after every other did.
func (g *generator) measure(p phase) *stats {
	st := &stats{}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0 := benchrun.SelfCPU()
	start := time.Now()
	end := start.Add(p.duration)
	for range p.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			errs, firstErr := 0, ""
			for {
				k := next.Add(1) - 1
				due := time.Now()
				if p.rate > 0 {
					due = start.Add(time.Duration(float64(k) / p.rate * float64(time.Second)))
					if due.After(end) {
						break
					}
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				} else if p.count > 0 && int(k) >= p.count || p.count == 0 && due.After(end) {
					break
				}
				var err error
				if p.mode == healthz {
					err = g.get("/healthz")
				} else {
					d := g.devs[int(k)%len(g.devs)]
					v := d.variant.Load()
					if p.mode != unchanged {
						v = d.variant.Add(1)
					}
					err = g.post("/agent/v1/checkin", d.auth, d.bodies[v&1], http.StatusOK, nil)
				}
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					continue
				}
				lat = append(lat, time.Since(due))
			}
			mu.Lock()
			st.lat = append(st.lat, lat...)
			st.errors += errs
			if st.firstErr == "" {
				st.firstErr = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	st.genCPU = benchrun.SelfCPU() - cpu0
	st.count = len(st.lat)
	st.name = p.name
	return st
}
