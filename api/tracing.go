package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests gives every request a server span of the global tracer
// provider, continuing the caller's W3C trace context when it sends one. The
// span rides on the request's context, so the store calls and the workflow
// starts of the handler (the Temporal client's tracing interceptor) join
// the request's trace. The request's log lines carry its trace id. Without
// a tracer provider (tracing off) the spans are no-ops.
func traceRequests() gin.HandlerFunc {
	tracer := otel.Tracer("iam/api")
	return func(c *gin.Context) {
		ctx := otel.GetTextMapPropagator().Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		route := c.FullPath()
		if route == "" {
			route = "unmatched route"
		}
		ctx, span := tracer.Start(ctx, c.Request.Method+" "+route,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", c.Request.Method),
				attribute.String("http.route", c.FullPath()),
				attribute.String("url.path", c.Request.URL.Path),
			))
		defer span.End()
		if sc := span.SpanContext(); sc.IsValid() {
			c.Set(ctxLogger, logger(c).With("trace_id", sc.TraceID().String()))
		}
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		status := c.Writer.Status()
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}
