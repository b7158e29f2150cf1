#!/bin/sh
# Runs the independent SCIM checks (check.mjs, with the npm library SCIMMY)
# against a fresh `iam dev`: builds iam, starts it on a free port with a
# fresh data folder, takes an admin token, creates a provisioning token
# through /api/v1 and runs the checks with it. Needs go, node and npm.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
go build -o "$work/iam" ./cmd/iam
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
export IAM_DATA_DIR="$work/data" IAM_LOG_LEVEL=warn IAM_DEV_TEMPORAL_PORT=0 IAM_DEV_UI_PORT=0 \
	IAM_HTTP_ADDR="127.0.0.1:$port" IAM_BOOTSTRAP_ADMIN_EMAIL=admin@example.com \
	IAM_BOOTSTRAP_ADMIN_PASSWORD=scim-conformance-admin
"$work/iam" dev >"$work/dev.log" 2>&1 &
pid=$!
base="http://127.0.0.1:$port"
i=0
until curl -fsS "$base/readyz" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -gt 240 ]; then echo "iam dev did not get ready:"; cat "$work/dev.log"; exit 1; fi
	sleep 0.5
done
admin=$("$work/iam" token --user admin@example.com --scopes svc.provisioning_token.ALL 2>"$work/token.log" |
	node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s.slice(s.indexOf("{"))).access_token))')
scim=$(curl -fsS -X POST "$base/api/v1/provisioning-tokens" -H "Authorization: Service-oauthtoken $admin" \
	-H 'Content-Type: application/json' --data '{"name":"SCIM conformance"}' |
	node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data.token))')
cd "$here"
npm ci --no-audit --no-fund --silent
IAM_SCIM_URL="$base/scim/v2" IAM_SCIM_TOKEN="$scim" node check.mjs
