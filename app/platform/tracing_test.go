package platform

import (
	"strings"
	"testing"
)

func TestTracingConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		endpoint string
		headers  map[string]string
		service  string
		sampler  string
		err      string
	}{
		{name: "nothing set: off", env: nil, service: "syncd"},
		{name: "base endpoint gets the traces path", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			endpoint: "http://collector:4318/v1/traces", service: "syncd", sampler: "parentbased_always_on"},
		{name: "the traces endpoint is taken as is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/otlp"},
			endpoint: "https://b/otlp", service: "syncd", sampler: "parentbased_always_on"},
		{name: "headers, decoded; the traces ones win", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a",
			"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x, k=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "k=2"},
			endpoint: "http://a/v1/traces", headers: map[string]string{"authorization": "Bearer x", "k": "2"}, service: "syncd", sampler: "parentbased_always_on"},
		{name: "service name and ratio sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_SERVICE_NAME": "edge",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
			endpoint: "http://a/v1/traces", service: "edge", sampler: "parentbased_traceidratio=0.25"},
		{name: "http/protobuf is accepted", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			endpoint: "http://a/v1/traces", service: "syncd", sampler: "parentbased_always_on"},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_SDK_DISABLED": "true"}, service: "syncd"},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_TRACES_EXPORTER": "none"}, service: "syncd"},
		{name: "grpc is refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "http/protobuf"},
		{name: "another exporter is refused", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "otlp"},
		{name: "a bad sampler is refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_TRACES_SAMPLER": "sometimes"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "a bad ratio is refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "ratio"},
		{name: "a bad endpoint is refused without its credentials", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://user:pw@a/x"}, err: "ftp://a/x"},
		{name: "bad headers are refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, err: "OTEL_EXPORTER_OTLP_HEADERS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := TracingConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "pw") {
					t.Fatalf("err %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Endpoint != tc.endpoint || c.ServiceName != tc.service || c.SamplerName != tc.sampler {
				t.Fatalf("config %+v", c)
			}
			if (c.Endpoint == "") != (c.Off != "") {
				t.Fatalf("off reason %q with endpoint %q", c.Off, c.Endpoint)
			}
			for k, v := range tc.headers {
				if c.Headers[k] != v {
					t.Fatalf("headers %v", c.Headers)
				}
			}
		})
	}
}
