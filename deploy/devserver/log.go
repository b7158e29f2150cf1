package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// minLevelHandler passes on only records at or above min, so the embedded
// server (which logs a lot at info) does not flood the application's log.
type minLevelHandler struct {
	min   slog.Leveler
	inner slog.Handler
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min.Level() && h.inner.Enabled(ctx, l)
}

func (h minLevelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.inner.Handle(ctx, r)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{min: h.min, inner: h.inner.WithAttrs(attrs)}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{min: h.min, inner: h.inner.WithGroup(name)}
}

// temporalLogger adapts a *slog.Logger to the Temporal server's log.Logger.
// Tags added by With are kept unconverted until a record is actually
// written: the server derives many loggers it rarely uses.
type temporalLogger struct {
	sl   *slog.Logger
	tags []tag.Tag
}

var (
	_ log.Logger      = temporalLogger{}
	_ log.WithLogger  = temporalLogger{}
	_ log.SLogWrapper = temporalLogger{}
)

func newTemporalLogger(sl *slog.Logger) temporalLogger {
	return temporalLogger{sl: sl}
}

func (l temporalLogger) Debug(msg string, tags ...tag.Tag) { l.log(slog.LevelDebug, msg, tags) }
func (l temporalLogger) Info(msg string, tags ...tag.Tag)  { l.log(slog.LevelInfo, msg, tags) }
func (l temporalLogger) Warn(msg string, tags ...tag.Tag)  { l.log(slog.LevelWarn, msg, tags) }
func (l temporalLogger) Error(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }

// DPanic only panics in development builds of zap; here it is an error.
func (l temporalLogger) DPanic(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }

// Panic logs and panics, as the server expects.
func (l temporalLogger) Panic(msg string, tags ...tag.Tag) {
	l.log(slog.LevelError, msg, tags)
	panic(msg)
}

// Fatal would exit the process with the server's own logger. Embedded in an
// application, it panics instead: during Start the panic is recovered and
// returned as an error (e.g. a port that cannot be bound); elsewhere it stops
// the process with a stack trace, as exiting would have.
func (l temporalLogger) Fatal(msg string, tags ...tag.Tag) {
	l.log(slog.LevelError, msg, tags)
	panic(fatalError{msg: msg, attrs: l.attrs(tags)})
}

func (l temporalLogger) With(tags ...tag.Tag) log.Logger {
	merged := make([]tag.Tag, 0, len(l.tags)+len(tags))
	merged = append(merged, l.tags...)
	merged = append(merged, tags...)
	return temporalLogger{sl: l.sl, tags: merged}
}

// SLog lets server components that want a *slog.Logger use the same sink.
func (l temporalLogger) SLog() *slog.Logger {
	if len(l.tags) == 0 {
		return l.sl
	}
	return l.sl.With(attrsToAny(l.attrs(nil))...)
}

// benignWarnings are warnings that are expected in this setup and would only
// alarm a developer; they are logged at info instead.
var benignWarnings = []string{
	// The frontend HTTP API (and with it Nexus) is deliberately not served.
	"HTTP API port has not been set",
}

func (l temporalLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	if level == slog.LevelWarn {
		for _, prefix := range benignWarnings {
			if strings.HasPrefix(msg, prefix) {
				level = slog.LevelInfo
			}
		}
	}
	ctx := context.Background()
	if !l.sl.Enabled(ctx, level) {
		return
	}
	l.sl.LogAttrs(ctx, level, msg, l.attrs(tags)...)
}

func (l temporalLogger) attrs(tags []tag.Tag) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(l.tags)+len(tags))
	for _, t := range l.tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	return attrs
}

func attrsToAny(attrs []slog.Attr) []any {
	out := make([]any, len(attrs))
	for i, a := range attrs {
		out[i] = a
	}
	return out
}

// fatalError is the panic value of temporalLogger.Fatal.
type fatalError struct {
	msg   string
	attrs []slog.Attr
}

func (e fatalError) Error() string {
	s := e.msg
	for _, a := range e.attrs {
		s += fmt.Sprintf(" %s=%v", a.Key, a.Value)
	}
	return s
}
