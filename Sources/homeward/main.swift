import HomewardCLI
await HomewardMain.run()
