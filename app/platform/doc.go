// Package platform is the process plumbing the server runs on, each part
// with behaviour of its own: readiness and its phases, the listeners and
// HTTP servers, the metrics registry, tracing, the logger, the clock,
// build information, key files and their reload, schema preparation, the
// admin listener's handler and the start banner. app/wiring binds these
// into the fx graph; nothing here decides which capability runs.
package platform
