// The team's rules for the todos demo schema (examples/todos): who a
// request is, which lists each user may see and write, and what a todo
// may hold. Each function takes the parsed callout body and returns
// { status, body } (body omitted for an empty answer); server.mjs does
// the HTTP, the signature check and the routing.
//
// The tables below stand in for the team's database: a real backend
// looks the session up and reads list membership with an indexed query.

// PARTITION is the one partition every user of the demo lives in: the
// users share it, and the scopes keep their lists apart.
export const PARTITION = "demo";

// MAX_TITLE is the longest todo title, in characters (code points).
export const MAX_TITLE = 80;

// users: who may sign in, and who is suspended (signs in, but is refused).
const users = new Map([
  ["alice", { suspended: false }],
  ["bob", { suspended: false }],
  ["mallory", { suspended: true }],
]);

// lists: list id → owner. Who may see a list's todos is decided here,
// not by the client: resolve-scopes grants each user the lists they own.
const lists = new Map([
  ["alice-groceries", "alice"],
  ["alice-work", "alice"],
  ["bob-home", "bob"],
]);

function listsOf(user) {
  return [...lists].filter(([, owner]) => owner === user).map(([id]) => id);
}

// authenticate (POST BASE/authenticate): the request's Authorization
// header carries "Bearer <user>", the stand-in for a session token. An
// unknown user is 401 (sync.auth_required to the client), a suspended
// one 403 (sync.forbidden).
export function authenticate(req) {
  const auth = req.headers?.authorization ?? [];
  const m = auth.length === 1 ? /^Bearer\s+(\S+)$/i.exec(auth[0]) : null;
  const user = m && users.get(m[1]);
  if (!user) return { status: 401 };
  if (user.suspended) return { status: 403 };
  // No "scopes": with --scopes callout, resolve-scopes decides.
  return { status: 200, body: { actorId: m[1], partition: PARTITION } };
}

// resolveScopes (POST BASE/resolve-scopes): a user's own lists (the
// lists table's owner_id scope) and the todos of the lists they own (the
// todos table's list_id scope). Anyone else gets nothing. The answer must
// not depend on clientId: syncd caches it per (partition, actor).
export function resolveScopes(req) {
  const user = users.get(req.actorId);
  if (req.partition !== PARTITION || !user || user.suspended) {
    return { status: 200, body: { scopes: {} } };
  }
  return { status: 200, body: { scopes: { owner_id: [req.actorId], list_id: listsOf(req.actorId) } } };
}

// validate (POST BASE/validate): syncd asks for every write of a table
// named by --callout-validate-tables ("kind": "row"), and for every commit
// with --callout-validate-commits ("kind": "commit"). A todo's title is
// required and at most MAX_TITLE characters; the rejection's code, message
// and details reach the client as the push result.
export function validate(req) {
  if (req.kind === "row" && req.table === "todos" && req.op === "upsert") {
    const reason = titleProblem(req.row?.title);
    if (reason) return reject(reason);
  }
  return { status: 200, body: { accept: true } };
}

function titleProblem(title) {
  if (typeof title !== "string" || title.trim() === "") return "required";
  if ([...title].length > MAX_TITLE) return "too_long";
  return null;
}

function reject(reason) {
  const message = reason === "too_long" ? `a todo title has at most ${MAX_TITLE} characters` : "a todo needs a title";
  return {
    status: 200,
    body: { reject: { code: `app.title_${reason}`, message, details: { fieldPaths: ["title"], reason } } },
  };
}

// ---------------------------------------------------------------------
// Commands and reactions (docs/callout.md: commands, reactions).

// untag reads REMOTE.md §4's tagged encoding of a command's params into
// plain values (integers stay decimal text: they may exceed 2^53).
function untag(v) {
  switch (v?.t) {
    case "object":
      return Object.fromEntries(v.v.map(([k, x]) => [k, untag(x)]));
    case "array":
      return v.v.map(untag);
    case "null":
      return null;
    default:
      return v?.v;
  }
}

// refuse is a command's own refusal; the code is one of the contract's
// operation.* codes, the message the team's own.
function refuse(code, message) {
  return { status: 200, body: { reject: { code, message } } };
}

// commands: name → handler, served at POST BASE/commands/<name>.
export const commands = {
  // addTodo appends a todo to one of the caller's lists:
  // params {listId, todoId, title} → the todos row to write. The writes go
  // through syncd's push pipeline, so the title validator runs on them too.
  addTodo(req) {
    const p = untag(req.params) ?? {};
    if (req.partition !== PARTITION || lists.get(p.listId) !== req.actorId) {
      return refuse("operation.forbidden", "the list is not yours");
    }
    if (typeof p.todoId !== "string" || p.todoId === "" || titleProblem(p.title)) {
      return refuse("operation.invalid_request", "todoId and a title of 1 to " + MAX_TITLE + " characters are required");
    }
    // A full row: every column of todos.
    const row = { id: p.todoId, list_id: p.listId, title: p.title, done: false, position: 0, updated_at_ms: Date.now() };
    return { status: 200, body: { writes: [{ table: "todos", values: row }] } };
  },
};

// notifier stands in for the system a reaction calls (a mail service, a
// push service). Its outage is simulated: failNextNotifications(n)
// makes the next n notifications fail, so syncd's retry can be seen.
const notifier = { failures: 0, sent: [] };

export function failNextNotifications(n) {
  notifier.failures = n;
}

// handled remembers the idempotency keys already acted on: delivery is
// at least once (a retry after a lost answer, another node after a lease
// expired), so the same key must not notify twice. A real backend keeps
// them in its database, in the transaction of the effect.
const handled = new Set();

// deliveries records every reaction delivery received, with the answer
// given, in order (server.mjs serves it to the repository's test with
// --test-endpoints).
const deliveries = [];

export function deliveryLog() {
  return deliveries;
}

// reactions: type → handler, served at POST BASE/reactions/<type>
// (--callout-reactions <type>). A 2xx with an empty body completes the
// reaction; a non-2xx with {code, permanent} fails the attempt (syncd
// retries it with backoff, or dead-letters it when permanent or out of
// attempts). The stock syncd plans them with the reactions of its rules
// file (docs/rules.md), a program that embeds syncd with its own planner.
export const reactions = {
  // todos.completed follows a todo marked done (examples/rules.yaml's
  // todo-completed rule): payload {todoId, listId, title, completedBy}.
  // Where a team would tell the list's other members.
  "todos.completed"(req, idempotencyKey) {
    const answer = completed(req, idempotencyKey);
    deliveries.push({
      type: req.type,
      idempotencyKey,
      attempt: req.attempt,
      payload: req.payload,
      source: req.source,
      status: answer.status,
    });
    return answer;
  },
};

function completed(req, idempotencyKey) {
  // The header and the body name the same key; a mismatch is not syncd.
  if (!idempotencyKey || idempotencyKey !== req.idempotencyKey) {
    return { status: 400, body: { error: "idempotency key header and body differ" } };
  }
  // An unknown version is a permanent failure: retrying cannot help.
  if (req.version !== 1) {
    return { status: 422, body: { code: "app.unknown_version", permanent: true, details: { version: req.version } } };
  }
  if (handled.has(idempotencyKey)) return { status: 204 };
  if (notifier.failures > 0) {
    notifier.failures--;
    return { status: 500, body: { code: "app.notifier_unavailable", permanent: false } };
  }
  const p = req.payload ?? {};
  notifier.sent.push({ list: p.listId, text: `${p.completedBy} completed "${p.title}"` });
  handled.add(idempotencyKey);
  console.log(`reaction ${req.type} ${idempotencyKey}: ${p.completedBy} completed ${p.todoId} in ${p.listId}`);
  return { status: 204 };
}
