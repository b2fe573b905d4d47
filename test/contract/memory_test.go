package contract_test

import (
	"testing"

	"github.com/syncd-dev/syncd/adapters/storage/memory"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/contract"
)

func TestMemory(t *testing.T) {
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) ports.Storage {
			s := memory.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Reopen: func(t *testing.T, s ports.Storage) ports.Storage {
			o := s.(*memory.Store).Reopen()
			t.Cleanup(func() { _ = o.Close() })
			return o
		},
	})
}
