# split.awk: from `strace -f` output, count syscalls by name between verb
# markers (write(-1, "<verb>", n) = -1 EBADF). Prints "verb|name×n ..." sorted
# by verb. mmap is split into mmap(dev) (MAP_SHARED: a queue or doorbell page)
# and mmap(anon) (memory for the library's own use). Go runtime housekeeping
# (signals, futexes, thread creation, yields) is not the verb's work and is
# summed as runtime×n. Only the thread that wrote the marker is counted:
# the Go runtime's other threads (sysmon and idle Ps, which under TCG make
# clock_gettime syscalls the vDSO would otherwise serve) are not the verb's.
/write\(-1, "/ {
  if (verb != "") flush()
  match($0, /write\(-1, "[^"]*"/); verb = substr($0, RSTART + 11, RLENGTH - 12)
  tid = $1; delete c; next
}
verb == "" || $1 != tid || /resumed>/ || /^[0-9]+ +(\+\+\+|---)/ { next }
{
  name = $2; sub(/\(.*/, "", name)
  if (name == "mmap") name = ($0 ~ /MAP_SHARED/) ? "mmap(dev)" : "mmap(anon)"
  if (name ~ /^(rt_sig.*|futex|clone|clone3|sched_yield|nanosleep|sigaltstack|gettid|tgkill|getpid)$/) name = "runtime"
  c[name]++
}
function flush(   k, s, n, keys, i, j, t) {
  n = 0
  for (k in c) keys[++n] = k
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (keys[j] < keys[i]) { t = keys[i]; keys[i] = keys[j]; keys[j] = t }
  s = ""
  for (i = 1; i <= n; i++) s = s " " keys[i] "x" c[keys[i]]
  print verb "|" substr(s, 2)
}
END { if (verb != "") flush() }
