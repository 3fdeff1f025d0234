/*
 * store-scripts.h: the Lua scripts that make semd's writes to Redis safe
 * against a second daemon (README "Ownership and standby").
 *
 * The owner key (P owner) holds "EPOCH ID ADDR" and expires owner-lease
 * after its last renewal; P epoch counts ownerships. Every write and every
 * heartbeat runs as one script that first checks that the owner key still
 * starts with this daemon's "EPOCH ID " (the fence) and renews it. A
 * daemon that lost its ownership therefore changes nothing: its script
 * answers an error starting with SEMDFENCED and the owner key's value.
 *
 * Keys other than KEYS[] are named in ARGV: semd talks to one Redis, not a
 * Cluster (README "Data model").
 */
#ifndef SEMD_STORE_SCRIPTS_H
#define SEMD_STORE_SCRIPTS_H

/*
 * The word a write script adds to its list of repaired keys when Redis had
 * lost the claim (no key of semd's contains a newline).
 */
#define STORE_RESTORED_WORD	"semd\nrestored"

/*
 * The fence, shared by the write and renew scripts: KEYS owner, epoch;
 * ARGV fence ("EPOCH ID "), value, lease ms. An owner key that is absent
 * while the epoch counter is below ours means Redis lost its data
 * (flushed, restarted empty): nobody took over, so the claim is put back
 * and the script says so (restored), so that the caller rewrites
 * everything: the token bound alone cannot tell, since the very batch
 * that restores the claim may raise it again.
 */
#define STORE_LUA_FENCE							\
	"local restored = false\n"					\
	"local cur = redis.pcall('GET', KEYS[1])\n"			\
	"if cur == false then\n"						\
	"  local mine = tonumber(string.match(ARGV[1], '^(%d+)'))\n"	\
	"  local last = tonumber(redis.pcall('GET', KEYS[2])) or 0\n"	\
	"  if mine and last < mine then\n"				\
	"    redis.call('SET', KEYS[2], mine)\n"			\
	"    cur = ARGV[2]\n"						\
	"    restored = true\n"					\
	"  end\n"							\
	"end\n"								\
	"if type(cur) ~= 'string' or "					\
	"string.sub(cur, 1, #ARGV[1]) ~= ARGV[1] then\n"		\
	"  local shown = type(cur) == 'string' and cur or '-'\n"	\
	"  return redis.error_reply('SEMDFENCED ' .. shown)\n"		\
	"end\n"								\
	"redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"

/*
 * Claim: KEYS owner, epoch, tokens; ARGV id, addr, resume epoch (0: none),
 * resume only ("1"), lease ms, least epoch (the highest this daemon has
 * seen). Answers {status, value, last epoch, token bound}:
 *   1  the data set is ours now (value: the owner key's);
 *   0  someone else owns it (value: the owner key's);
 *   2  resume only, and the epoch moved on;
 *   3  the key is this process's own, from a claim or write that it saw
 *      no answer to: it is left to expire, never renewed here, so that a
 *      daemon whose replies are lost (a one-way partition) cannot keep
 *      the data set from a standby for ever;
 *   4  the epoch counter is absent or below the least epoch: Redis lost
 *      its data (flushed, restarted empty) while an owner may still hold
 *      leases in memory. Taking it would start tokens and epochs again
 *      from scratch, so the claimer waits for that owner to restore its
 *      claim (the fence does) or for an operator to set the counter.
 * The token bound is "0" when absent or not a string.
 */
#define STORE_LUA_CLAIM							\
	"local cur = redis.call('GET', KEYS[1])\n"			\
	"local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n" \
	"local t = redis.pcall('GET', KEYS[3])\n"			\
	"if type(t) ~= 'string' then t = '0' end\n"			\
	"local resume = tonumber(ARGV[3])\n"				\
	"if cur then\n"							\
	"  local e, id = string.match(cur, '^(%d+) (%S+)')\n"		\
	"  if id == ARGV[1] then return {3, cur, last, t} end\n"	\
	"  return {0, cur, last, t}\n"					\
	"end\n"								\
	"if last < tonumber(ARGV[6]) then return {4, '', last, t} end\n" \
	"if ARGV[4] == '1' and last ~= resume then\n"			\
	"  return {2, '', last, t}\n"					\
	"end\n"								\
	"local epoch = resume\n"					\
	"if resume == 0 or last ~= resume then\n"			\
	"  epoch = redis.call('INCR', KEYS[2])\n"			\
	"end\n"								\
	"local v = epoch .. ' ' .. ARGV[1] .. ' ' .. ARGV[2]\n"		\
	"redis.call('SET', KEYS[1], v, 'PX', ARGV[5])\n"		\
	"return {1, v, epoch, t}\n"

/*
 * Write: KEYS owner, epoch; ARGV fence, value, lease ms, then commands, each as
 * its word count and its words. A key of semd's with the wrong type (a
 * foreign key under the prefix) is replaced: semd's keys are its copy of
 * memory. Answers the list of keys replaced, and STORE_RESTORED after
 * them when the fence put the claim back; any other error aborts.
 *
 * A lease's end is written on Redis's clock, not semd's: a grant's value
 * says "deadline_ms=+T" (T ms left) and the script turns it into Redis's
 * TIME + T, so that a standby whose wall clock is ahead cannot end a lease
 * early (the load measures what is left against Redis's TIME again).
 * TIME in a script that writes needs effects replication (the default
 * from Redis 5 on; asked for explicitly, before any write, for Redis 3.2
 * and 4).
 */
#define STORE_LUA_WRITE							\
	"if redis.replicate_commands then redis.replicate_commands() end\n" \
	STORE_LUA_FENCE							\
	"local tm = redis.call('TIME')\n"				\
	"local now = tonumber(tm[1]) * 1000 + "				\
	"math.floor(tonumber(tm[2]) / 1000)\n"				\
	"local function at(left)\n"					\
	"  return 'deadline_ms=' .. string.format('%.0f', "		\
	"now + tonumber(left))\n"					\
	"end\n"								\
	"local repaired = {}\n"						\
	"local i = 4\n"							\
	"while i <= #ARGV do\n"						\
	"  local n = tonumber(ARGV[i])\n"				\
	"  local cmd = {unpack(ARGV, i + 1, i + n)}\n"			\
	"  if cmd[1] == 'HSET' and cmd[4] then\n"			\
	"    cmd[4] = string.gsub(cmd[4], 'deadline_ms=%+(%d+)', at)\n"	\
	"  end\n"							\
	"  local r = redis.pcall(unpack(cmd))\n"			\
	"  if type(r) == 'table' and r.err then\n"			\
	"    if not string.find(r.err, 'WRONGTYPE', 1, true) then\n"	\
	"      return redis.error_reply(r.err)\n"			\
	"    end\n"							\
	"    redis.call('DEL', cmd[2])\n"				\
	"    redis.call(unpack(cmd))\n"					\
	"    repaired[#repaired + 1] = cmd[2]\n"			\
	"  end\n"							\
	"  i = i + n + 1\n"						\
	"end\n"								\
	"if restored then repaired[#repaired + 1] = 'semd\\nrestored' end\n" \
	"return repaired\n"

/*
 * Renew (the heartbeat): KEYS owner, epoch, tokens; ARGV fence, value,
 * lease ms.
 * Answers the token bound ("0" when absent, "wrongtype" when P tokens is
 * not a string, "restored" when the fence put the claim back).
 */
#define STORE_LUA_RENEW							\
	STORE_LUA_FENCE							\
	"if restored then return 'restored' end\n"			\
	"local t = redis.pcall('GET', KEYS[3])\n"			\
	"if type(t) == 'table' then return 'wrongtype' end\n"		\
	"return t or '0'\n"

#endif /* SEMD_STORE_SCRIPTS_H */
