package contentaddr

import "testing"

func TestOf(t *testing.T) {
	const empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got := Of(nil); got != empty {
		t.Fatalf("Of(nil) = %s", got)
	}
	h := NewHasher()
	_, _ = h.Write([]byte("ab"))
	_, _ = h.Write([]byte("c"))
	if h.Sum() != Of([]byte("abc")) {
		t.Fatal("streamed hash differs")
	}
}

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		Of([]byte("x")):  true,
		"sha256:":        false,
		"sha256:" + "AB": false,
		"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85G": false,
		"sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855": false,
		"sha256:E3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855": false,
	} {
		if Valid(s) != want {
			t.Errorf("Valid(%q) = %v", s, !want)
		}
	}
}
