package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"iam/api/clientaddr"
	"iam/models"
)

// Context keys set by the middleware.
const (
	ctxLogger    = "iam.logger"
	ctxPrincipal = "iam.principal"
	ctxQuiet     = "iam.quiet"
)

// RequestIDHeader carries the request id, in and out.
const RequestIDHeader = "X-Request-Id"

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID takes a sane incoming X-Request-Id or makes one, sends it back,
// and gives the request a logger that carries it.
func requestID(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !validRequestID.MatchString(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Header(RequestIDHeader, id)
		c.Set(ctxLogger, log.With("request_id", id))
		c.Next()
	}
}

// origin gives the request's context the audit Origin of the changes it
// makes: the client's address (under the trusted-proxy rules), its user
// agent and the request id; authenticate adds the actor.
func origin(trusted []netip.Prefix) gin.HandlerFunc {
	return func(c *gin.Context) {
		o := models.Origin{
			Actor:     models.SystemActor,
			IPAddress: clientaddr.Key(c.Request, trusted),
			UserAgent: c.Request.UserAgent(),
			RequestID: c.Writer.Header().Get(RequestIDHeader),
		}
		c.Request = c.Request.WithContext(models.WithOrigin(c.Request.Context(), o))
		c.Next()
	}
}

// withActor makes actor the actor of the changes the request makes (its
// context's audit Origin) and returns the request's new context.
func withActor(c *gin.Context, actor models.Actor) context.Context {
	o := models.OriginOf(c.Request.Context())
	o.Actor = actor
	c.Request = c.Request.WithContext(models.WithOrigin(c.Request.Context(), o))
	return c.Request.Context()
}

// accessLog writes one structured line per request: at info, or at debug
// for a route marked quiet that succeeded.
func accessLog() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		level := slog.LevelInfo
		if c.GetBool(ctxQuiet) && status < http.StatusBadRequest {
			level = slog.LevelDebug
		} else if status == http.StatusServiceUnavailable {
			level = slog.LevelWarn // an outage, logged once by its cause
		} else if status >= 500 {
			level = slog.LevelError
		}
		logger(c).Log(c.Request.Context(), level, "request",
			"method", c.Request.Method,
			"route", c.FullPath(),
			"path", c.Request.URL.Path,
			"status", status,
			"duration_ms", time.Since(start).Milliseconds(),
			"bytes", c.Writer.Size(),
		)
	}
}

// quiet marks a route whose successful requests the access log writes at
// debug: the device check-ins, which a fleet of 100,000 devices at a 60 s
// interval sends 1,700 times a second. Refused ones stay at info.
func quiet() gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Set(ctxQuiet, true)
		c.Next()
	}
}

// recoverer turns a panic into the 500 error body and logs the stack. A
// panic with an outage error (models.NewID without a live id lease) is
// answered as the outage it is: 503 with Retry-After.
func recoverer() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if p := recover(); p != nil {
				if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(p)
				}
				if err, ok := p.(error); ok && models.IsUnavailable(err) {
					logger(c).Warn("outage", "error", err)
					if !c.Writer.Written() {
						abortWithError(c, err)
					}
					c.Abort()
					return
				}
				logger(c).Error("panic", "panic", p, "stack", string(debug.Stack()))
				if !c.Writer.Written() {
					abortWithError(c, errInternal())
				}
				c.Abort()
			}
		}()
		c.Next()
	}
}

// limitBody caps the request body at limit bytes: a declared length over it
// is refused at once, and a longer body fails on read.
func limitBody(limit int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > limit {
			abortWithError(c, &http.MaxBytesError{Limit: limit})
			return
		}
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
		}
		c.Next()
	}
}

// httpMetrics are the request counters and latencies served on /metrics.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iam_http_requests_total",
			Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "iam_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *httpMetrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(c.Request.Method, route, strconv.Itoa(c.Writer.Status())).Inc()
		m.duration.WithLabelValues(c.Request.Method, route).Observe(time.Since(start).Seconds())
	}
}
