-- A user's session with AccelOpt in headless Neovim (0.7 and later), driven by
-- tests/nvim/test_neovim.py. The editor configuration under test is the README's, loaded with
-- `-u`; this script only acts as the user would (open, save, run a lens, pick a code action)
-- and records what the editor saw as JSON in $ACCELOPT_NVIM_REPORT.
--
-- Interactive pickers are answered by replacing vim.ui.select (Neovim's documented override
-- point); errors shown to the user are captured by replacing vim.notify and reading :messages.

local report = { steps = {}, errors = {}, notifications = {}, progress = {} }
local kernel_file = os.getenv("ACCELOPT_NVIM_FILE")
local report_file = os.getenv("ACCELOPT_NVIM_REPORT")
local timeout_ms = tonumber(os.getenv("ACCELOPT_NVIM_TIMEOUT_MS") or "90000")

local function finish()
  report.messages = vim.api.nvim_exec("messages", true)
  local f = assert(io.open(report_file, "w"))
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd("qa!")
end

local function step(name, ok, detail)
  table.insert(report.steps, { name = name, ok = ok and true or false, detail = detail })
  if not ok then
    finish()
  end
end

local original_notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(report.notifications, { msg = tostring(msg), level = level })
  if level and level >= vim.log.levels.ERROR then
    table.insert(report.errors, tostring(msg))
  end
  return original_notify(msg, level, opts)
end

-- Work-done progress as the editor receives it (percentages of the search).
local progress_handler = vim.lsp.handlers["$/progress"]
vim.lsp.handlers["$/progress"] = function(err, result, ctx, config)
  if result and result.value then
    table.insert(report.progress, {
      kind = result.value.kind,
      percentage = result.value.percentage,
      message = result.value.message,
    })
  end
  if progress_handler then
    return progress_handler(err, result, ctx, config)
  end
end

local function clients(bufnr)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = bufnr, name = "accelopt" })
  end
  local out = {}
  for _, c in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if c.name == "accelopt" then
      table.insert(out, c)
    end
  end
  return out
end

local function lenses(bufnr)
  vim.lsp.codelens.refresh()
  vim.wait(200)
  return vim.lsp.codelens.get(bufnr) or {}
end

local function find_lens(bufnr, pattern)
  for _, lens in ipairs(lenses(bufnr)) do
    if lens.command and lens.command.title:find(pattern) then
      return lens
    end
  end
end

-- Run the lens whose title matches `pattern` the way a user does: cursor on its line,
-- vim.lsp.codelens.run(), pick it in the menu when the line has several.
local function run_lens(bufnr, lens, pattern)
  vim.api.nvim_win_set_cursor(0, { lens.range.start.line + 1, 0 })
  local original_select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    for i, item in ipairs(items) do
      local title = (item.command and item.command.title) or (opts.format_item and opts.format_item(item)) or ""
      if title:find(pattern) then
        return on_choice(item, i)
      end
    end
    on_choice(nil, nil)
  end
  local ok, err = pcall(vim.lsp.codelens.run)
  vim.ui.select = original_select
  return ok, err
end

vim.cmd("edit " .. kernel_file)
local buf = vim.api.nvim_get_current_buf()
local attached = vim.wait(30000, function()
  local c = clients(buf)[1]
  return c ~= nil and c.initialized == true
end, 50)
step("attached", attached)
local client = clients(buf)[1]
report.offset_encoding = client.offset_encoding

-- 1. Save: the server profiles the file; the lens shows the latency.
vim.cmd("write")
local profile_lens
step("profile lens", vim.wait(timeout_ms, function()
  profile_lens = find_lens(buf, " ms")
  return profile_lens ~= nil
end, 300))
report.profile_title = profile_lens.command.title

-- 2. The profile lens is a label: running it must not be an error.
local before = #report.errors
local ok, err = run_lens(buf, profile_lens, " ms")
vim.wait(500)
step("run label lens", ok and #report.errors == before, err or report.errors[#report.errors])

-- 3. Optimize through its lens; wait for the search's progress to end.
local optimize = find_lens(buf, "^Optimize")
step("optimize lens", optimize ~= nil)
ok, err = run_lens(buf, optimize, "^Optimize")
step("run optimize", ok, err)
step("search ended", vim.wait(timeout_ms, function()
  for _, p in ipairs(report.progress) do
    if p.kind == "end" then
      return true
    end
  end
  return false
end, 200))

-- 3b. The README's :AccelOptSearch prints where the search is drawn as a page (issue 32).
local printed = {}
local original_print = print
print = function(...)
  local parts = {}
  for _, v in ipairs({ ... }) do
    table.insert(parts, tostring(v))
  end
  table.insert(printed, table.concat(parts, " "))
end
vim.cmd("AccelOptSearch")
step("search page", vim.wait(60000, function()
  return #printed > 0
end, 100), printed)
print = original_print
report.search_page = printed[1]

-- 4. The ranked improvement is offered as a code action; pick and apply it.
-- What vim.lsp.buf.code_action() asks for with the cursor on the kernel's line.
local function offered()
  vim.api.nvim_win_set_cursor(0, { optimize.range.start.line + 1, 0 })
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {} }
  local titles = {}
  local responses = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", params, 10000) or {}
  for _, response in pairs(responses) do
    for _, action in ipairs(response.result or {}) do
      if action.title:find("faster") then
        table.insert(titles, action.title)
      end
    end
  end
  return titles
end
local titles = {}
step("improvement offered", vim.wait(15000, function()
  titles = offered()
  return #titles > 0
end, 300), titles)
report.offered_before = titles

local text_before = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
local original_select = vim.ui.select
vim.ui.select = function(items, opts, on_choice)
  for i, item in ipairs(items) do
    local action = item.action or item[2] or item
    if action.title and action.title:find("faster") then
      return on_choice(item, i)
    end
  end
  on_choice(nil, nil)
end
vim.api.nvim_win_set_cursor(0, { optimize.range.start.line + 1, 0 })
vim.lsp.buf.code_action()
step("edit applied", vim.wait(15000, function()
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") ~= text_before
end, 100))
vim.ui.select = original_select
vim.cmd("write")
report.offered_after = offered()
step("done", true)
finish()
