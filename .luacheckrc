-- luacheck's settings for `make lint-lua`, which checks every step as Redis
-- runs it: target/lua-assembled/<step>.lua, written by a cargo test
-- (src/scripts/assembly.rs) from the step's file and the libraries it
-- includes. Redis runs Lua 5.1 with these globals besides the standard ones.
std = "lua51"
read_globals = {"redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct"}
max_line_length = 120
