package syncerr

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Body is the SPEC §10.1 JSON shape of an error, in ERROR-frame field order.
type Body struct {
	Code              Code            `json:"code"`
	Message           string          `json:"message"`
	Category          Category        `json:"category"`
	Retryable         bool            `json:"retryable"`
	RecommendedAction Action          `json:"recommendedAction"`
	Details           json.RawMessage `json:"details,omitempty"`
}

// Body returns the error's §10.1 rendering: catalog fields for its code,
// its message, and its details when they are a JSON object.
func (e *Error) Body() Body {
	ent := Lookup(e.Code)
	msg := e.Message
	if msg == "" {
		msg = ent.Message
	}
	b := Body{
		Code:              e.Code,
		Message:           msg,
		Category:          ent.Category,
		Retryable:         ent.Retryable,
		RecommendedAction: ent.RecommendedAction,
	}
	if d := bytes.TrimSpace(e.Details); len(d) > 0 && d[0] == '{' && json.Valid(d) {
		b.Details = d
	}
	return b
}

// MarshalJSON renders the §10.1 shape. Reason and the cause are never
// rendered.
func (e *Error) MarshalJSON() ([]byte, error) { return json.Marshal(e.Body()) }

// Public returns the form of err a client may see. A *Error (anywhere in
// the chain) with an exposed code is returned as is; any other error,
// including host-only codes, becomes sync.internal_error with the
// catalog message, so no internal text reaches a client. nil stays nil.
func Public(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && Lookup(e.Code).Exposed && Known(e.Code) {
		return e
	}
	return Wrap(InternalError, err).WithMessage(Lookup(InternalError).Message)
}

// HTTPStatus is the status for answering this error as a request-level
// JSON body: the catalog's, or for codes that never travel at request
// level the status of their category.
func (e *Error) HTTPStatus() int {
	ent := Lookup(e.Code)
	if ent.HTTPStatus != 0 {
		return ent.HTTPStatus
	}
	return categoryStatus[ent.Category]
}

var categoryStatus = map[Category]int{
	CategoryInvalidRequest: 400,
	CategoryAuthRequired:   401,
	CategoryForbidden:      403,
	CategoryNotFound:       404,
	CategoryConflict:       409,
	CategorySchemaMismatch: 400,
	CategoryResetRequired:  409,
	CategoryScopeRevoked:   403,
	CategoryRateLimited:    429,
	CategoryInternal:       500,
}
