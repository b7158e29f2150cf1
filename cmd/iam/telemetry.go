package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// TracingConfig turns on OpenTelemetry tracing (docs/operations.md): the
// standard OTLP exporter variables. With no endpoint set, nothing is traced.
// The exporter reads the other standard OTEL_EXPORTER_OTLP_* variables
// (headers, certificates, timeouts) from the process environment itself.
type TracingConfig struct {
	Endpoint       string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	// Protocol is grpc (the default here) or http/protobuf.
	Protocol string `env:"OTEL_EXPORTER_OTLP_PROTOCOL" envDefault:"grpc"`
}

func (c TracingConfig) enabled() bool { return c.Endpoint != "" || c.TracesEndpoint != "" }

func (c TracingConfig) check() error {
	switch c.Protocol {
	case "grpc", "http/protobuf":
		return nil
	}
	return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not grpc or http/protobuf", c.Protocol)
}

// tracing is a process's tracer provider, when tracing is on.
type tracing struct {
	provider *sdktrace.TracerProvider
}

// startTracing installs the global tracer provider and propagator of a
// process named service (iam-serve, iam-worker, iam-dev) when cfg has an
// endpoint; otherwise tracing stays off and costs nothing. Spans are
// exported in batches; Shutdown flushes what is left.
func startTracing(ctx context.Context, cfg TracingConfig, service string, log *slog.Logger) (*tracing, error) {
	if !cfg.enabled() {
		return &tracing{}, nil
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if cfg.Protocol == "http/protobuf" {
		var opts []otlptracehttp.Option
		if cfg.TracesEndpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.TracesEndpoint))
		} else {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	} else {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cmp.Or(cfg.TracesEndpoint, cfg.Endpoint)))
	}
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry", "error", err)
	}))
	log.Info("tracing on", "protocol", cfg.Protocol, "service", service)
	return &tracing{provider: tp}, nil
}

// tracedTemporalOptions are the Temporal client options of cfg for a
// process named service, with tracing started (startTracing) and the
// client instrumented when it is configured. Shut the tracing down last.
func tracedTemporalOptions(ctx context.Context, cfg Config, service string, log *slog.Logger) (client.Options, *tracing, error) {
	opts, err := temporalOptions(cfg.Temporal, log)
	if err != nil {
		return opts, nil, err
	}
	tr, err := startTracing(ctx, cfg.Tracing, service, log)
	if err != nil {
		return opts, nil, err
	}
	if err := tr.instrument(&opts); err != nil {
		tr.Shutdown()
		return opts, nil, err
	}
	return opts, tr, nil
}

// instrument adds the Temporal tracing interceptor to opts when tracing is
// on: a workflow start made inside a traced request carries the trace, and
// the workflow's and its activities' spans join it on the worker.
func (t *tracing) instrument(opts *client.Options) error {
	if t.provider == nil {
		return nil
	}
	ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: t.provider.Tracer("iam/temporal"),
	})
	if err != nil {
		return fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	opts.Interceptors = append(opts.Interceptors, ti)
	return nil
}

// Shutdown exports the spans still buffered, within a few seconds.
func (t *tracing) Shutdown() {
	if t.provider == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		otel.Handle(err)
	}
}
