package testenv_test

import (
	"testing"

	"github.com/syncd-dev/syncd/test/testenv"
)

func TestScale(t *testing.T) {
	want := 1000
	if testenv.Race {
		want = 100
	}
	if got := testenv.Scale(1000, 10); got != want {
		t.Fatalf("Scale = %d, want %d", got, want)
	}
	if got := testenv.Scale(1000, 0); got != 1000 {
		t.Fatalf("Scale(div 0) = %d", got)
	}
}
