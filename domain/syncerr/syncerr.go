// Package syncerr is the closed error catalog of SPEC §10 plus the storage
// and readiness codes a server uses internally, and the one error type that
// carries a catalog code through every layer.
package syncerr

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Code is a stable catalog code such as "sync.invalid_request".
type Code string

// Category groups codes for clients (SPEC §10.1).
type Category string

// Categories of SPEC §10.
const (
	CategoryInvalidRequest Category = "invalid-request"
	CategoryAuthRequired   Category = "auth-required"
	CategoryForbidden      Category = "forbidden"
	CategoryNotFound       Category = "not-found"
	CategoryConflict       Category = "conflict"
	CategorySchemaMismatch Category = "schema-mismatch"
	CategoryResetRequired  Category = "reset-required"
	CategoryScopeRevoked   Category = "scope-revoked"
	CategoryRateLimited    Category = "rate-limited"
	CategoryInternal       Category = "internal"
)

// Action is the recommended client action for a code.
type Action string

// Surface is where a code reaches a client.
type Surface string

// Surfaces.
const (
	// SurfaceRequest: a request-level failure (HTTP JSON body or ERROR frame).
	SurfaceRequest Surface = "request"
	// SurfaceResult: only inside a push operation result record (§6.3).
	SurfaceResult Surface = "result"
	// SurfaceSubStart: only as a SUB_START reason code (§4.4).
	SurfaceSubStart Surface = "sub_start"
	// SurfaceHost: never on the wire (host-only codes).
	SurfaceHost Surface = ""
)

// Entry is one catalog row: fixed per code.
type Entry struct {
	Code              Code
	Category          Category
	Retryable         bool
	RecommendedAction Action
	// HTTPStatus is the status for a request-level failure answered as JSON;
	// 0 for codes that only ever appear inside results or SUB_START.
	HTTPStatus int
	// Wire is true for codes of the protocol catalog (SPEC §10.2); false
	// for host-only storage, readiness and server codes.
	Wire bool
	// Exposed is true for codes rendered to clients verbatim: every wire
	// code and nothing else (SPEC §10.3: the catalog is closed). Any other
	// code is rendered as sync.internal_error.
	Exposed bool
	// Surface is where a wire code is delivered.
	Surface Surface
	// Message is the default human-readable message.
	Message string
}

// Error is an error with a catalog code, an optional message override,
// optional JSON details and an optional internal cause. Only Code, Message
// and Details ever reach a client; Reason and the cause stay in logs.
type Error struct {
	Code    Code
	Message string
	Details json.RawMessage
	// Reason is a precise internal explanation (e.g. which decode rule failed).
	Reason string
	cause  error
}

// New builds an Error with the catalog's default message.
func New(code Code) *Error { return &Error{Code: code, Message: Lookup(code).Message} }

// Newf builds an Error with a precise internal reason.
func Newf(code Code, format string, args ...any) *Error {
	e := New(code)
	e.Reason = fmt.Sprintf(format, args...)
	return e
}

// Wrap builds an Error around an internal cause.
func Wrap(code Code, cause error) *Error {
	e := New(code)
	e.cause = cause
	if cause != nil {
		e.Reason = cause.Error()
	}
	return e
}

// WithMessage returns a copy with a different client-facing message.
func (e *Error) WithMessage(msg string) *Error { c := *e; c.Message = msg; return &c }

// WithDetails returns a copy carrying details marshalled to JSON.
func (e *Error) WithDetails(v any) *Error {
	c := *e
	b, err := json.Marshal(v)
	if err == nil {
		c.Details = b
	}
	return &c
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return string(e.Code) + ": " + e.Reason
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the internal cause.
func (e *Error) Unwrap() error { return e.cause }

// Entry returns the catalog row for the error's code.
func (e *Error) Entry() Entry { return Lookup(e.Code) }

// CodeOf returns the catalog code of err, or "" when err carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
