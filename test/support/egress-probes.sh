# Sourced (eval) by runs of the egress tests: see probeRun in outside-hosts.ts. No shebang: never run alone.
proxy=${HTTP_PROXY#http://}; proxy=${proxy%/}
creds=${proxy%@*}; where=${proxy#*@}; phost=${where%:*}; pport=${where##*:}
auth=$(printf '%s' "$creds" | base64 -w0)
read_answer() {
  local status line body
  IFS= read -r -t 8 status <&3 || { echo "closed"; return; }
  while IFS= read -r -t 8 line <&3; do if [ "$line" = $'\r' ] || [ -z "$line" ]; then break; fi; done
  body=$(timeout 8 head -c 200 <&3 | tr -c '[:print:]' ' ')
  echo "${status%$'\r'} | $body"
}
http() {
  local label=$1 url=$2 host=${3:-} a=${4:-$auth}
  if [ -z "$host" ]; then host=${url#http://}; host=${host%%/*}; fi
  exec 3<>"/dev/tcp/$phost/$pport" || { echo "$label proxy-unreachable"; return; }
  { printf 'GET %s HTTP/1.1\r\nHost: %s\r\n' "$url" "$host"; [ "$a" = - ] || printf 'Proxy-Authorization: Basic %s\r\n' "$a"; printf 'Connection: close\r\n\r\n'; } >&3
  echo "$label $(read_answer)"
  exec 3<&-
}
tunnel() {
  local label=$1 target=$2 payload=$3 status line back
  exec 3<>"/dev/tcp/$phost/$pport" || { echo "$label proxy-unreachable"; return; }
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n' "$target" "$target" "$auth" >&3
  if ! IFS= read -r -t 8 status <&3; then echo "$label closed"; exec 3<&-; return; fi
  while IFS= read -r -t 8 line <&3; do if [ "$line" = $'\r' ] || [ -z "$line" ]; then break; fi; done
  printf '%s' "$payload" | base64 -d >&3 2>/dev/null
  back=$(timeout 8 head -c 5 <&3 2>/dev/null | od -An -tx1 | tr -d ' \n')
  echo "$label ${status%$'\r'} | reply=${back:-none}"
  exec 3<&-
}
tcp() { if timeout 4 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; then echo "$1 OPEN"; else echo "$1 closed"; fi; }
udp() { for i in 1 2 3; do echo "udp-from-container $1" 2>/dev/null > "/dev/udp/$2/$3"; done 2>/dev/null; echo "$1 sent"; }
dns() {
  local back
  back=$( (exec 3<>"/dev/udp/$2/53" && printf '\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07allowed\x04test\x00\x00\x01\x00\x01' >&3 && timeout 3 head -c 2 <&3 | od -An -tx1) 2>/dev/null | tr -d ' \n')
  if [ -n "$back" ]; then echo "$1 ANSWERED"; else echo "$1 silent"; fi
}
model() {
  local base=${ANTHROPIC_BASE_URL#http://} text=hi body
  if [ -n "${3:-}" ]; then text=$(head -c "$3" /dev/zero | tr '\0' x); fi
  body='{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"'$text'"}]}'
  base=${base%/}
  exec 3<>"/dev/tcp/${base%:*}/${base##*:}" || { echo "$1 gateway-unreachable"; return; }
  printf 'POST /v1/messages HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: %d\r\nConnection: close\r\n\r\n%s' "$base" "$2" "${#body}" "$body" >&3
  echo "$1 $(read_answer)"
  exec 3<&-
}
