package platform

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/app/config"
)

// Environ reads one environment variable. The graph reads the process
// environment (os.Getenv) unless one is supplied (tests).
type Environ func(key string) string

// TracingConfig is what the environment says about traces.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP traces URL; "" turns tracing off.
	Endpoint string
	// Off says why tracing is off when Endpoint is "".
	Off string
	// Headers are sent with every export (credentials: never logged).
	Headers     map[string]string
	ServiceName string
	// Sampler and SamplerName: OTEL_TRACES_SAMPLER(_ARG), default
	// parentbased_always_on.
	Sampler     sdktrace.Sampler
	SamplerName string
}

// TracingConfigFromEnv reads the standard variables:
// OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp or none),
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, /v1/traces appended),
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (http/protobuf only),
// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, OTEL_SERVICE_NAME and
// OTEL_TRACES_SAMPLER(_ARG).
func TracingConfigFromEnv(env Environ) (TracingConfig, error) {
	get := func(k string) string { return strings.TrimSpace(env(k)) }
	c := TracingConfig{ServiceName: "syncd"}
	if s := get("OTEL_SERVICE_NAME"); s != "" {
		c.ServiceName = s
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		c.Off = "OTEL_SDK_DISABLED=true"
		return c, nil
	}
	switch e := get("OTEL_TRACES_EXPORTER"); e {
	case "", "otlp":
	case "none":
		c.Off = "OTEL_TRACES_EXPORTER=none"
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: syncd exports traces with otlp (or none)", e)
	}
	endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		if base := get("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			endpoint = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if endpoint == "" {
		c.Off = "no OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		return c, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("OTLP traces endpoint %q: want an http:// or https:// URL", redactURL(endpoint))
	}
	c.Endpoint = endpoint
	proto := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: syncd exports OTLP over HTTP (http/protobuf) only", proto)
	}
	c.Headers = map[string]string{}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parseHeaders(get(k), c.Headers); err != nil {
			return c, fmt.Errorf("%s: %w", k, err)
		}
	}
	c.Sampler, c.SamplerName, err = parseSampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	return c, err
}

// parseHeaders reads "key=value,key2=value2" (values URL-encoded) into m;
// later keys win.
func parseHeaders(s string, m map[string]string) error {
	if s == "" {
		return nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("want key=value pairs separated by commas")
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("header %q: bad escape", k)
		}
		m[k] = dv
	}
	return nil
}

// parseSampler reads OTEL_TRACES_SAMPLER and its argument.
func parseSampler(name, arg string) (sdktrace.Sampler, string, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), "parentbased_always_on", nil
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), name + "=" + strconv.FormatFloat(ratio, 'g', -1, 64), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), name + "=" + strconv.FormatFloat(ratio, 'g', -1, 64), nil
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// redactURL drops a URL's user info and query, which may carry credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// TracingParams are the inputs of NewTracerProvider.
type TracingParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    config.Config
	Info      BuildInfo
	Log       *zap.Logger
	Env       Environ `optional:"true"`
}

// NewTracerProvider builds the graph's tracer provider from the
// environment. When tracing is on, spans go through a batch processor to
// the OTLP/HTTP exporter; on stop the provider flushes them, bounded by
// --shutdown-timeout. An export failure never fails the stop: traces are
// not worth an unclean exit.
func NewTracerProvider(p TracingParams) (trace.TracerProvider, error) {
	env := p.Env
	if env == nil {
		env = os.Getenv
	}
	c, err := TracingConfigFromEnv(env)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	log := p.Log.Named("tracing")
	if c.Endpoint == "" {
		p.Lifecycle.Append(fx.StartHook(func() { log.Info("traces off", zap.String("reason", c.Off)) }))
		return noop.NewTracerProvider(), nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(c.Endpoint), otlptracehttp.WithHeaders(c.Headers))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(c.ServiceName), semconv.ServiceVersion(p.Info.Version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(c.Sampler))
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			log.Info("traces on: exporting OTLP over HTTP", zap.String("endpoint", redactURL(c.Endpoint)),
				zap.String("service_name", c.ServiceName), zap.String("sampler", c.SamplerName),
				zap.Int("headers", len(c.Headers)))
			return nil
		},
		OnStop: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, p.Config.ShutdownTimeout)
			defer cancel()
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn("traces not flushed at stop", zap.Error(err))
			}
			return nil
		},
	})
	return tp, nil
}

// TracingOn returns tp when it records spans, nil for the no-op provider,
// so consumers skip their wrappers entirely when tracing is off.
func TracingOn(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return nil
	}
	if _, off := tp.(noop.TracerProvider); off {
		return nil
	}
	return tp
}
