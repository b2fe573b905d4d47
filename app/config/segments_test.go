package config_test

import (
	"testing"
	"time"

	"github.com/syncd-dev/syncd/app/config"
)

func TestSegmentSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, s config.Segments)
	}{
		{name: "defaults", check: func(t *testing.T, s config.Segments) {
			if s != config.DefaultSegments() || s.Store != "db" || s.TTL != 24*time.Hour || s.SignedURLTTL != 5*time.Minute || !s.Images {
				t.Fatalf("got %+v", s)
			}
		}},
		{name: "filesystem store", args: []string{"--segment-store", "fs", "--segment-dir", "/var/seg", "--segment-ttl", "1h"}, check: func(t *testing.T, s config.Segments) {
			if s.Store != "fs" || s.Dir != "/var/seg" || s.TTL != time.Hour {
				t.Fatalf("got %+v", s)
			}
		}},
		{name: "signed urls", args: []string{"--signed-url-key-file", "/k", "--public-url", "https://sync.example.com/api", "--signed-url-ttl", "15m"}, check: func(t *testing.T, s config.Segments) {
			if s.SignedURLKeyFile != "/k" || s.PublicURL != "https://sync.example.com/api" || s.SignedURLTTL != 15*time.Minute {
				t.Fatalf("got %+v", s)
			}
		}},
		{name: "image scratch dir", args: []string{"--image-dir", "/var/tmp/img"}, check: func(t *testing.T, s config.Segments) {
			if !s.Images || s.ImageDir != "/var/tmp/img" {
				t.Fatalf("got %+v", s)
			}
		}},
		{name: "images off", args: []string{"--image-segments=false"}, check: func(t *testing.T, s config.Segments) {
			if s.Images {
				t.Fatalf("got %+v", s)
			}
		}},
		{name: "image dir without images", args: []string{"--image-segments=false", "--image-dir", "/x"}, wantErr: "--image-dir"},
		{name: "fs without dir", args: []string{"--segment-store", "fs"}, wantErr: "--segment-dir"},
		{name: "unknown store", args: []string{"--segment-store", "s3"}, wantErr: "want db or fs"},
		{name: "ttl too long", args: []string{"--signed-url-ttl", "16m"}, wantErr: "at most 15m"},
		{name: "key without public url", args: []string{"--signed-url-key-file", "/k"}, wantErr: "--public-url"},
		{name: "public url with slash", args: []string{"--public-url", "https://h/api/"}, wantErr: "--public-url"},
		{name: "public url without scheme", args: []string{"--public-url", "h:8787"}, wantErr: "--public-url"},
		{name: "zero segment ttl", args: []string{"--segment-ttl", "0s"}, wantErr: "--segment-ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := loadSettings(t, tc.args, nil, tc.wantErr)
			if !ok {
				return
			}
			tc.check(t, cfg.Segments)
		})
	}
}
