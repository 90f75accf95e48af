"""AccelOpt language server: thin LSP handlers over accelopt_core."""
