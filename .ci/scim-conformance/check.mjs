// Independent conformance checks of /scim/v2 with SCIMMY (npm scimmy, an
// RFC 7643/7644 implementation that is not this project's code): its
// schema definitions validate every resource and discovery document the
// service answers, its filter engine decides which users a filter must
// match, its PATCH engine what each PATCH must produce, and the paging
// totals are checked against the full list.
//
// Usage: IAM_SCIM_URL=http://127.0.0.1:8080/scim/v2 IAM_SCIM_TOKEN=iamscim_... node check.mjs
import SCIMMY from "scimmy";
import assert from "node:assert/strict";

const base = process.env.IAM_SCIM_URL;
const token = process.env.IAM_SCIM_TOKEN;
if (!base || !token) {
  console.error("IAM_SCIM_URL and IAM_SCIM_TOKEN are required");
  process.exit(2);
}
const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const ENT = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error";
SCIMMY.Schemas.User.extend(SCIMMY.Schemas.EnterpriseUser);
const run = Date.now().toString(36);

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log("ok   " + name);
  } catch (e) {
    failures++;
    console.log("FAIL " + name + ": " + (e && e.stack ? e.stack.split("\n").slice(0, 4).join("\n     ") : e));
  }
}

async function call(method, path, body, headers = {}) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: "Bearer " + token, Accept: "application/scim+json",
      ...(body ? { "Content-Type": "application/scim+json" } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const ct = res.headers.get("content-type") || "";
  if (text) assert.ok(ct.startsWith("application/scim+json"), `${method} ${path}: content type ${ct}`);
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

function want(r, status, what) {
  assert.equal(r.status, status, `${what}: status ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body;
}

function wantError(r, status, scimType) {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.deepEqual(r.body.schemas, [ERROR]);
  assert.equal(r.body.status, String(status));
  if (scimType) assert.equal(r.body.scimType, scimType);
}

// valid checks a resource against SCIMMY's schema definition (required
// attributes, types, mutability as answered by a service provider).
function valid(schema, doc) {
  schema.definition.coerce(doc, "out");
}

// pick returns the attributes paths of doc (a.b for sub-attributes), for
// comparing what a PATCH changed.
function pick(doc, paths) {
  const out = {};
  for (const p of paths) {
    const [a, b] = p.split(".");
    let v = doc?.[a];
    if (b !== undefined) v = v?.[b];
    out[p] = v === undefined ? null : v;
  }
  return out;
}

function norm(v) {
  // Compare multi-valued attributes as sets of their values and types.
  if (Array.isArray(v)) return v.map((e) => JSON.stringify({ value: e.value, type: e.type })).sort();
  return v;
}

await check("discovery: ServiceProviderConfig", async () => {
  const spc = want(await call("GET", "/ServiceProviderConfig"), 200, "config");
  valid(SCIMMY.Schemas.ServiceProviderConfig, spc);
  assert.equal(spc.patch.supported, true);
  assert.equal(spc.filter.supported, true);
  assert.ok(spc.filter.maxResults > 0);
  assert.equal(spc.bulk.supported, false);
});

await check("discovery: ResourceTypes and Schemas", async () => {
  const rt = want(await call("GET", "/ResourceTypes"), 200, "resource types");
  assert.equal(rt.totalResults, rt.Resources.length);
  for (const t of rt.Resources) valid(SCIMMY.Schemas.ResourceType, t);
  const names = rt.Resources.map((t) => t.name).sort();
  assert.deepEqual(names, ["Group", "User"]);
  const user = rt.Resources.find((t) => t.name === "User");
  assert.equal(user.schema, USER);
  assert.ok(user.schemaExtensions.some((e) => e.schema === ENT));
  const sc = want(await call("GET", "/Schemas"), 200, "schemas");
  const ids = sc.Resources.map((s) => s.id).sort();
  assert.deepEqual(ids, [ENT, GROUP, USER].sort());
  for (const s of sc.Resources) {
    // Every attribute the service declares is one SCIMMY's definition knows, with its type.
    const def = { [USER]: SCIMMY.Schemas.User, [ENT]: SCIMMY.Schemas.EnterpriseUser, [GROUP]: SCIMMY.Schemas.Group }[s.id];
    for (const a of s.attributes) {
      const known = def.definition.attribute(s.id === ENT ? `${ENT}:${a.name}` : a.name);
      assert.equal(known.type, a.type, `${s.id} ${a.name}: type ${a.type}, SCIMMY says ${known.type}`);
      assert.equal(known.config.multiValued, a.multiValued, `${s.id} ${a.name}: multiValued`);
    }
  }
  want(await call("GET", "/Schemas/" + USER), 200, "user schema");
});

const created = [];
const fullUser = (i, extra = {}) => ({
  schemas: [USER, ENT],
  userName: `conf-${run}-${i}@example.org`,
  externalId: `ext-${run}-${i}`,
  name: { givenName: `Given${i}`, familyName: i % 2 ? "Odd" : "Even" },
  displayName: `Given${i} ${i % 2 ? "Odd" : "Even"}`,
  emails: [{ value: `conf-${run}-${i}@example.org`, type: "work", primary: true }],
  active: i !== 3,
  ...(i % 3 === 0 ? { title: "Engineer" } : {}),
  [ENT]: { department: i < 3 ? "Sales" : "R&D", employeeNumber: `${run}-${i}` },
  ...extra,
});

await check("users: create, read, replace, delete", async () => {
  const u = want(await call("POST", "/Users", fullUser(0)), 201, "create");
  valid(SCIMMY.Schemas.User, u);
  assert.equal(u.userName, fullUser(0).userName);
  assert.equal(u[ENT].department, "Sales");
  assert.ok(u.meta && u.meta.location && u.meta.version);
  const got = want(await call("GET", "/Users/" + u.id), 200, "get");
  valid(SCIMMY.Schemas.User, got);
  assert.equal(got.id, u.id);
  const put = want(await call("PUT", "/Users/" + u.id, { ...fullUser(0), name: { givenName: "Changed", familyName: "Even" } }), 200, "put");
  assert.equal(put.name.givenName, "Changed");
  wantError(await call("POST", "/Users", fullUser(0)), 409, "uniqueness");
  wantError(await call("PUT", "/Users/" + u.id, fullUser(0), { "If-Match": 'W/"0"' }), 412);
  assert.equal((await call("DELETE", "/Users/" + u.id)).status, 204);
  wantError(await call("GET", "/Users/" + u.id), 404);
});

await check("users: PATCH of core, multi-valued and extension attributes as SCIMMY applies it", async () => {
  let cur = want(await call("POST", "/Users", fullUser(9)), 201, "create");
  created.push(cur.id);
  const steps = [
    [{ op: "replace", path: "name.givenName", value: "Patched" }, { op: "add", path: "title", value: "Lead" }],
    [{ op: "replace", path: 'emails[type eq "work"].value', value: `patched-${run}@example.org` }],
    [{ op: "add", path: "phoneNumbers", value: [{ type: "mobile", value: "+1 555 0199" }] }],
    [{ op: "replace", path: `${ENT}:department`, value: "Support" }],
    [{ op: "replace", value: { displayName: "Patched Person", name: { familyName: "Family" } } }],
    [{ op: "remove", path: "title" }],
    [{ op: "replace", path: "active", value: false }],
  ];
  const paths = ["name.givenName", "name.familyName", "title", "emails", "phoneNumbers", "displayName", "active"];
  for (const ops of steps) {
    const expected = await new SCIMMY.Messages.PatchOp({ schemas: [PATCH], Operations: ops })
      .apply(new SCIMMY.Schemas.User(cur, "in"), async (x) => x);
    const got = want(await call("PATCH", "/Users/" + cur.id, { schemas: [PATCH], Operations: ops }), 200, JSON.stringify(ops));
    valid(SCIMMY.Schemas.User, got);
    const e = pick(JSON.parse(JSON.stringify(expected)), paths), g = pick(got, paths);
    for (const p of paths) assert.deepEqual(norm(g[p]), norm(e[p]), `${JSON.stringify(ops)}: ${p}`);
    assert.equal(got[ENT]?.department ?? null, expected[ENT]?.department ?? null, `${JSON.stringify(ops)}: department`);
    cur = got;
  }
});

await check("users: filters select what SCIMMY's filter engine selects", async () => {
  for (let i = 1; i <= 6; i++) created.push(want(await call("POST", "/Users", fullUser(i)), 201, "create " + i).id);
  const all = want(await call("GET", "/Users?count=1000"), 200, "all").Resources;
  const filters = [
    `userName eq "conf-${run}-2@example.org"`,
    `userName sw "conf-${run}-"`,
    `userName co "${run}-4"`,
    `userName ew "-5@example.org"`,
    `externalId eq "ext-${run}-1"`,
    `title pr`,
    `not (title pr) and userName sw "conf-${run}"`,
    `name.familyName eq "Odd" or name.givenName eq "Given2"`,
    `(name.familyName eq "Even" and active eq true) or userName eq "conf-${run}-3@example.org"`,
    `active eq false`,
    `emails[type eq "work" and value ew "-6@example.org"]`,
    `emails.value sw "conf-${run}-1"`,
    `meta.created gt "2000-01-01T00:00:00Z" and userName sw "conf-${run}"`,
    `displayName ne "Given1 Odd" and userName sw "conf-${run}"`,
    `name.givenName gt "Given4" and userName sw "conf-${run}"`,
    `name.givenName le "Given2" and userName sw "conf-${run}"`,
  ];
  for (const f of filters) {
    const expected = new SCIMMY.Types.Filter(f).match(all).map((u) => u.id).sort();
    const got = want(await call("GET", "/Users?count=1000&filter=" + encodeURIComponent(f)), 200, f);
    assert.equal(got.totalResults, expected.length, `${f}: totalResults ${got.totalResults}, SCIMMY ${expected.length}`);
    assert.deepEqual(got.Resources.map((u) => u.id).sort(), expected, f);
  }
  wantError(await call("GET", "/Users?filter=" + encodeURIComponent("userName eq")), 400, "invalidFilter");
  const dept = want(await call("GET", "/Users?filter=" + encodeURIComponent(`${ENT}:department eq "Sales" and userName sw "conf-${run}"`)), 200, "extension filter");
  assert.deepEqual(dept.Resources.map((u) => u.id).sort(), all.filter((u) => u[ENT]?.department === "Sales" && u.userName.startsWith(`conf-${run}`)).map((u) => u.id).sort());
});

await check("users: paging with startIndex and count", async () => {
  const total = want(await call("GET", "/Users?count=0"), 200, "count=0");
  assert.equal(total.Resources.length, 0);
  const seen = new Set();
  for (let start = 1; ; start += 2) {
    const page = want(await call("GET", `/Users?startIndex=${start}&count=2`), 200, "page");
    assert.equal(page.totalResults, total.totalResults);
    assert.equal(page.startIndex, start);
    assert.equal(page.itemsPerPage, page.Resources.length);
    if (page.Resources.length === 0) break;
    for (const u of page.Resources) {
      assert.ok(!seen.has(u.id), "a user on two pages");
      seen.add(u.id);
    }
  }
  assert.equal(seen.size, total.totalResults);
  const sorted = want(await call("GET", "/Users?count=1000&sortBy=userName&sortOrder=descending"), 200, "sorted");
  const names = sorted.Resources.map((u) => u.userName.toLowerCase());
  assert.deepEqual(names, [...names].sort().reverse());
  const proj = want(await call("GET", "/Users?count=1&attributes=userName"), 200, "attributes");
  assert.deepEqual(Object.keys(proj.Resources[0]).sort(), ["id", "schemas", "userName"]);
});

await check("groups: create, members by PATCH as SCIMMY applies it, replace, delete", async () => {
  const [a, b, c] = created.slice(1, 4);
  const g = want(await call("POST", "/Groups", { schemas: [GROUP], displayName: `Conf ${run}`, members: [{ value: a }] }), 201, "create");
  valid(SCIMMY.Schemas.Group, g);
  let cur = g;
  const steps = [
    [{ op: "add", path: "members", value: [{ value: b }, { value: c }] }],
    [{ op: "remove", path: `members[value eq "${b}"]` }],
    [{ op: "replace", path: "displayName", value: `Conf ${run} renamed` }],
    [{ op: "add", path: "members", value: [{ value: a }] }],
  ];
  for (const ops of steps) {
    const expected = await new SCIMMY.Messages.PatchOp({ schemas: [PATCH], Operations: ops })
      .apply(new SCIMMY.Schemas.Group(cur, "in"), async (x) => x);
    const got = want(await call("PATCH", "/Groups/" + cur.id, { schemas: [PATCH], Operations: ops }), 200, JSON.stringify(ops));
    valid(SCIMMY.Schemas.Group, got);
    assert.equal(got.displayName, expected.displayName);
    assert.deepEqual((got.members || []).map((m) => m.value).sort(), [...new Set((expected.members || []).map((m) => m.value))].sort(), JSON.stringify(ops));
    cur = got;
  }
  const byMember = want(await call("GET", "/Groups?filter=" + encodeURIComponent(`members[value eq "${c}"]`)), 200, "by member");
  assert.ok(byMember.Resources.some((x) => x.id === g.id));
  const lean = want(await call("GET", "/Groups?excludedAttributes=members&filter=" + encodeURIComponent(`displayName eq "Conf ${run} renamed"`)), 200, "lean");
  assert.equal(lean.totalResults, 1);
  assert.equal(lean.Resources[0].members, undefined);
  const put = want(await call("PUT", "/Groups/" + g.id, { schemas: [GROUP], displayName: `Conf ${run} put`, members: [{ value: c }] }), 200, "put");
  assert.deepEqual(put.members.map((m) => m.value), [c]);
  assert.equal((await call("DELETE", "/Groups/" + g.id)).status, 204);
  wantError(await call("GET", "/Groups/" + g.id), 404);
});

for (const id of created) await call("DELETE", "/Users/" + id);
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
