package push

// MaxReactionTypeBytes bounds a durable reaction's type (SPEC §6.9).
const MaxReactionTypeBytes = 128

// ReactionType reports whether s is a reaction type SPEC §6.9 accepts: a
// code-like name — a letter, then letters, digits and ". _ - : /" — of at
// most MaxReactionTypeBytes bytes.
func ReactionType(s string) bool {
	if s == "" || len(s) > MaxReactionTypeBytes {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9', r == '.', r == '_', r == '-', r == ':', r == '/':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}
