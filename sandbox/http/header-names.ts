// Response and request header names that carry the service's brand prefix (`Svc` by default).

export interface HeaderNames {
  debugId: string;
  dataRetrievedAt: string;
  warnings: string;
  billingId: string;
  billingEnabled: string;
  asyncId: string;
  asyncState: string;
  asyncStartedAt: string;
  asyncFinishedAt: string;
  asyncExpiresAt: string;
}

export function headerNames(prefix: string): HeaderNames {
  return {
    debugId: `${prefix}-Debug-Id`,
    dataRetrievedAt: `${prefix}-Data-Retrieved-At`,
    warnings: `${prefix}-Warnings`,
    billingId: `${prefix}-Billing-Id`,
    billingEnabled: `${prefix}-Billing-Enabled`,
    asyncId: `${prefix}-Async-Request-Id`,
    asyncState: `${prefix}-Async-Request-State`,
    asyncStartedAt: `${prefix}-Async-Request-Started-At`,
    asyncFinishedAt: `${prefix}-Async-Request-Finished-At`,
    asyncExpiresAt: `${prefix}-Async-Request-Expires-At`,
  };
}
