package platform

import (
	"fmt"

	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/syncd-dev/syncd/app/config"
)

// NewLogger builds the process logger: JSON to stderr by default,
// human-readable console output with --dev.
func NewLogger(cfg config.Config) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	var zc zap.Config
	if cfg.Dev {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	} else {
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.TimeKey = "ts"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	// Errors carry their context in fields; stack traces are added
	// explicitly where they help (recovered panics).
	zc.DisableStacktrace = true
	return zc.Build()
}

// FxLogger routes fx's own events through zap at debug level. Failures
// are debug too: Run reports each one once, by its root cause.
func FxLogger(log *zap.Logger) fxevent.Logger {
	l := &fxevent.ZapLogger{Logger: log.Named("fx")}
	l.UseLogLevel(zapcore.DebugLevel)
	l.UseErrorLevel(zapcore.DebugLevel)
	return l
}
