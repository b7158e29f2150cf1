#!/bin/sh
# Writes .env at the repository's root with fresh random keys for
# docker-compose.yml: IAM_ENCRYPTION_KEY and IAM_AUDIT_SIGNING_KEY (32
# random bytes, base64 each) and IAM_SECRET_KEY (48 random bytes, base64). It never overwrites an existing
# .env: losing IAM_ENCRYPTION_KEY makes stored uploads and enrollment
# secrets unreadable. .env stays out of git (.gitignore).
set -eu
cd "$(dirname "$0")/.."
if [ -e .env ]; then
	echo "gen-env.sh: .env exists; remove it first if you really mean to replace the keys" >&2
	exit 1
fi
umask 077
{
	echo "# Made by deploy/gen-env.sh; keep it secret and keep it: see .env.example."
	echo "IAM_ENCRYPTION_KEY=$(openssl rand -base64 32)"
	echo "IAM_AUDIT_SIGNING_KEY=$(openssl rand -base64 32)"
	echo "IAM_SECRET_KEY=$(openssl rand -base64 48)"
} >.env
echo "wrote .env"
